// The refusals of the rlmesh-observability chart's values that JSON Schema cannot
// express: observabilityCrossFieldErrors() decides when, and the chart's
// templates/_validate.tpl includes the generated obs.refusal.<name> templates.
import type { Refusal } from './refusals.ts';

export const OBSERVABILITY_REFUSALS = {
  grafanaNoPassword: {
    path: 'grafana.enabled',
    message: 'grafana.enabled is true but no admin password is given: set grafana.adminPassword or grafana.adminPasswordSecretName (a Secret in the release namespace), or leave grafana.enabled=false',
  },
  grafanaTwoPasswords: {
    path: 'grafana.adminPassword',
    message: 'grafana.adminPassword and grafana.adminPasswordSecretName are both set: give one password source',
  },
  remoteWriteCell: {
    path: 'prometheus.remoteWrite.{index}.url',
    message: 'prometheus.remoteWrite[{index}].url writes to cluster {cell} but prometheus.clusterLabel is {clusterLabel}: use the same cluster id in both',
  },
  grafanaNoImage: {
    path: 'grafana.image.repository',
    message:
      'grafana.enabled is true but grafana.image.repository is empty: this chart names no Grafana image (RLMesh builds and publishes none, so there is none it could vouch for); mirror the Grafana version you trust into your registry and set grafana.image.repository, grafana.image.tag and grafana.image.digest, or leave grafana.enabled=false',
  },
  apiServerAddressesUnknown: {
    path: 'network.apiServerAddresses',
    message:
      "is empty and the Kubernetes API's addresses could not be read from the cluster (helm template, helm lint and --dry-run=client do not read it; an install reads EndpointSlice and Service default/kubernetes): without them the chart would have to open the API's ports to every address. Run rlmesh preflight against the cluster, which prints the --set network.apiServerAddresses={…} line to add (the same for both charts)",
  },
  noClusterLabel: {
    path: 'prometheus.clusterLabel',
    message: "prometheus.clusterLabel is empty: set it to the cluster's public id (Clusters shows it) so every series is labelled cluster=<id>",
  },
} as const satisfies Record<string, Refusal>;
