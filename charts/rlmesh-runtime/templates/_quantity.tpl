{{/* Generated from lib/quantity.ts by `npm run generate`; do not edit. */}}
{{/* A Kubernetes quantity as the values take it (CHART_QUANTITY), in bytes, as a float (parseQuantity()) */}}
{{- define "rlmesh.quantityBytes" -}}
{{- $num := regexFind `^[0-9]+(\.[0-9]+)?` . }}
{{- $unit := trimPrefix $num . }}
{{- $units := dict "" 1.0 "m" 0.001 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- mulf (float64 $num) (get $units $unit) }}
{{- end }}
