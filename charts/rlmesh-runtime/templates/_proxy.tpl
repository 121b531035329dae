{{/* Generated from lib/outbound-proxy-values.ts by `npm run generate`; do not edit. */}}
{{/*
controlPlane.proxy as JSON: the url's parts (matched, scheme, userinfo, host, hostKind
name|ipv4|ipv6|invalid, port: the url's or the scheme's default, 0 when invalid, rest: path,
query or fragment), the CIDR pattern addresses must match, and addresses: the NetworkPolicy
peer (controlPlane.proxy.addresses, or the /32 or /128 of an IP-literal host).
*/}}
{{- define "rlmesh.proxy" -}}
{{- $p := .Values.controlPlane.proxy }}
{{- $re := `^([A-Za-z][A-Za-z0-9+.-]*)://([^@/?#]*@)?(\[[^\]/?#@]*\]|[^:/?#@\[\]]*)(:[^/?#]*)?([/?#].*)?$` }}
{{- $out := dict "matched" false "scheme" "" "userinfo" false "host" "" "hostKind" "invalid" "port" 0 "rest" "" "cidrPattern" `^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\/([0-9]|[1-2][0-9]|3[0-2])$|^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:))\/(12[0-8]|1[01][0-9]|[1-9]?[0-9])$` }}
{{- if regexMatch $re $p.url }}
{{- $scheme := regexReplaceAll $re $p.url "${1}" }}
{{- $host := regexReplaceAll $re $p.url "${3}" }}
{{- $port := regexReplaceAll $re $p.url "${4}" }}
{{- $kind := "invalid" }}
{{- if regexMatch `^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$` $host }}{{ $kind = "ipv4" }}
{{- else if and (hasPrefix "[" $host) (hasSuffix "]" $host) (regexMatch `^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:))$` (trimSuffix "]" (trimPrefix "[" $host))) }}{{ $kind = "ipv6" }}
{{- else if and (le (len $host) 253) (regexMatch `^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$` $host) }}{{ $kind = "name" }}
{{- end }}
{{- $n := 0 }}
{{- if eq $port "" }}{{ $n = get (dict "http" 80 "https" 443) $scheme | default 0 }}
{{- else if and (regexMatch "^:[0-9]{1,5}$" $port) (ge (atoi (trimPrefix ":" $port)) 1) (le (atoi (trimPrefix ":" $port)) 65535) }}{{ $n = atoi (trimPrefix ":" $port) }}
{{- end }}
{{- $_ := set $out "matched" true }}
{{- $_ = set $out "scheme" $scheme }}
{{- $_ = set $out "userinfo" (ne (regexReplaceAll $re $p.url "${2}") "") }}
{{- $_ = set $out "host" $host }}
{{- $_ = set $out "hostKind" $kind }}
{{- $_ = set $out "port" $n }}
{{- $_ = set $out "rest" (regexReplaceAll $re $p.url "${5}") }}
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
