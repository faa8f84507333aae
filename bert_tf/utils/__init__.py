"""What every layer uses: the user's files, progress, the command line, the CPU."""
