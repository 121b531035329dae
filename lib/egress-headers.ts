// The headers the egress proxy answers a request it did not carry out with:
// the refusal rule, or why it could not connect. Clients (the artifact cache
// filler) read them to say what happened.
export const REFUSED_HEADER = 'X-RLMesh-Egress-Refused';
export const ERROR_HEADER = 'X-RLMesh-Egress-Error';
