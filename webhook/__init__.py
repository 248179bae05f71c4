"""The admission webhook: rules shared with `phalanx simulate`, the Flask app, and its gunicorn server."""
