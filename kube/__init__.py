"""Kubernetes plumbing shared by the scheduler, the webhook and the certificate controller: the API client, typed
API errors, retries with backoff, the raw transport and the one informer."""
