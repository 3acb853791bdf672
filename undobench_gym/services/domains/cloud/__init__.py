"""Cloud: services, blue/green deployments, traffic weights and a discovery catalog."""
