"""The human side: the manual decision service, token verification, the API and the console."""
