"""Goals: a persisted objective that keeps one session working across automatic continuation rounds."""
