"""teams"""
