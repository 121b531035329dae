// templates/_proxy.tpl: rlmesh.proxy, controlPlane.proxy read as parseProxyUrl() and
// proxyPeer() in lib/outbound-proxy-values.ts read it, with the same patterns, for
// _validate.tpl (its refusals) and the NetworkPolicies (the proxy's addresses and port).
import { CIDR_PATTERN, DEFAULT_PROXY_PORTS, HOST_NAME_PATTERN, IPV4_PATTERN, IPV6_PATTERN, PROXY_URL_PATTERN } from '../../lib/outbound-proxy-values.ts';

/** A Go raw string: none of the patterns holds a backtick. */
const raw = (s: string): string => {
  if (s.includes('`')) throw new Error(`pattern ${s} has a backtick; a Go template raw string cannot hold it`);
  return `\`${s}\``;
};

export function proxyTemplate(): string {
  return `{{/* Generated from lib/outbound-proxy-values.ts by \`npm run generate\`; do not edit. */}}
{{/*
controlPlane.proxy as JSON: the url's parts (matched, scheme, userinfo, host, hostKind
name|ipv4|ipv6|invalid, port: the url's or the scheme's default, 0 when invalid, rest: path,
query or fragment), the CIDR pattern addresses must match, and addresses: the NetworkPolicy
peer (controlPlane.proxy.addresses, or the /32 or /128 of an IP-literal host).
*/}}
{{- define "rlmesh.proxy" -}}
{{- $p := .Values.controlPlane.proxy }}
{{- $re := ${raw(PROXY_URL_PATTERN)} }}
{{- $out := dict "matched" false "scheme" "" "userinfo" false "host" "" "hostKind" "invalid" "port" 0 "rest" "" "cidrPattern" ${raw(CIDR_PATTERN)} }}
{{- if regexMatch $re $p.url }}
{{- $scheme := regexReplaceAll $re $p.url "\${1}" }}
{{- $host := regexReplaceAll $re $p.url "\${3}" }}
{{- $port := regexReplaceAll $re $p.url "\${4}" }}
{{- $kind := "invalid" }}
{{- if regexMatch ${raw(IPV4_PATTERN)} $host }}{{ $kind = "ipv4" }}
{{- else if and (hasPrefix "[" $host) (hasSuffix "]" $host) (regexMatch ${raw(IPV6_PATTERN)} (trimSuffix "]" (trimPrefix "[" $host))) }}{{ $kind = "ipv6" }}
{{- else if and (le (len $host) 253) (regexMatch ${raw(HOST_NAME_PATTERN)} $host) }}{{ $kind = "name" }}
{{- end }}
{{- $n := 0 }}
{{- if eq $port "" }}{{ $n = get (dict "http" ${DEFAULT_PROXY_PORTS.http} "https" ${DEFAULT_PROXY_PORTS.https}) $scheme | default 0 }}
{{- else if and (regexMatch "^:[0-9]{1,5}$" $port) (ge (atoi (trimPrefix ":" $port)) 1) (le (atoi (trimPrefix ":" $port)) 65535) }}{{ $n = atoi (trimPrefix ":" $port) }}
{{- end }}
{{- $_ := set $out "matched" true }}
{{- $_ = set $out "scheme" $scheme }}
{{- $_ = set $out "userinfo" (ne (regexReplaceAll $re $p.url "\${2}") "") }}
{{- $_ = set $out "host" $host }}
{{- $_ = set $out "hostKind" $kind }}
{{- $_ = set $out "port" $n }}
{{- $_ = set $out "rest" (regexReplaceAll $re $p.url "\${5}") }}
{{- end }}
{{- $addresses := $p.addresses }}
{{- if not $addresses }}
{{- if eq $out.hostKind "ipv4" }}{{ $addresses = list (printf "%s/32" $out.host) }}
{{- else if eq $out.hostKind "ipv6" }}{{ $addresses = list (printf "%s/128" (trimSuffix "]" (trimPrefix "[" $out.host))) }}
{{- else }}{{ $addresses = list }}
{{- end }}
{{- end }}
{{- $_ := set $out "addresses" $addresses }}
{{- toJson $out }}
{{- end }}
`;
}

export async function outputs(): Promise<Record<string, string>> {
  return { 'charts/rlmesh-runtime/templates/_proxy.tpl': proxyTemplate() };
}
