"""messaging"""
