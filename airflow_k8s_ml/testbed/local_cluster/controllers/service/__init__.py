"""v1 Service: cluster IP admission, Endpoints and EndpointSlices from ready pods, and the service/pod
proxy."""
