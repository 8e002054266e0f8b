"""The application shell: settings, the composition root, the commands and their start-up."""
