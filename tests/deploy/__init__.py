"""What an operator installs: the image, cronjob/ and its components, the RBAC."""
