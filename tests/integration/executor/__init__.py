"""The executor protocol in the database: its functions and the state machine."""
