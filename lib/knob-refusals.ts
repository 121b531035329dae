// Refusals of the chart's ordinary knobs (lib/chart-knobs.ts, knobErrors()); part
// of VALUES_REFUSALS, so the chart's generated _refusals.tpl has them too.
import type { Refusal } from './refusals.ts';

export const KNOB_REFUSALS = {
  knobKey: {
    path: '{field}.{key}',
    message: '{key:q} is not a label or annotation key: an optional DNS subdomain prefix and /, then a name of at most 63 letters, digits, -, _ and . that starts and ends with a letter or digit (example.com/team)',
  },
  knobReservedKey: {
    path: '{field}.{key}',
    message:
      '{key} is a key the chart sets itself (app.kubernetes.io/*, helm.sh/chart, rlmesh.dev/*, and checksum/* on pods), which the Deployments, Services and NetworkPolicies select by: overriding it would detach them from their pods; choose a key of your own, such as example.com/team',
  },
  serviceAccountAnnotationKey: {
    path: '{block}.serviceAccount.annotations.{key}',
    message:
      '{key:q} is not an annotation key, and the API server would refuse the ServiceAccount partway through the install: write an optional DNS subdomain prefix and /, then a name of at most 63 letters, digits, -, _ and . that starts and ends with a letter or digit, such as eks.amazonaws.com/role-arn or iam.gke.io/gcp-service-account',
  },
  extraEnvReserved: {
    path: '{block}.extraEnv.{index}',
    message: '{name} is an environment variable the chart sets itself on this container: a second entry would override the runtime\'s own setting; set it through the chart\'s values (logging.level, controlPlane.proxy, agent.nodeOptions, ...) or choose another name',
  },
  extraEnvValue: {
    path: '{block}.extraEnv.{index}',
    message: '{name} has both value and valueFrom, and the apiserver refuses a variable with both: keep value for a literal, or valueFrom (e.g. secretKeyRef) for a secret',
  },
  extraVolumeHostPath: {
    path: '{block}.extraVolumes.{index}',
    message:
      '{name} is a hostPath volume ({hostPath}): the chart\'s pods meet Pod Security restricted, which refuses host paths, and a runtime pod with the node\'s files would reach past its fence; deliver the files as a configMap, secret, projected or csi volume instead',
  },
  extraVolumeType: {
    path: '{block}.extraVolumes.{index}',
    message:
      '{name} is a volume of type {type}, which Pod Security restricted refuses (the chart\'s pods meet it): use configMap, secret, projected, downwardAPI, emptyDir, csi, ephemeral or persistentVolumeClaim',
  },
  extraVolumeReserved: {
    path: '{block}.extraVolumes.{index}',
    message: '{name} is the name of a volume the chart gives this pod itself (config, tmp, ca-bundle, spool, cluster-ranges, proxy-credentials), and the API server refuses two of one name: choose another name',
  },
  extraVolumeTwice: {
    path: '{block}.extraVolumes.{index}',
    message: '{name} is listed more than once, and the API server refuses two volumes of one name: list each volume once',
  },
  extraVolumeMountUnknown: {
    path: '{block}.extraVolumeMounts.{index}',
    message: '{name} names no volume of {block}.extraVolumes: add that volume to {block}.extraVolumes, or mount one it has',
  },
  nameserverNotDnsPeer: {
    path: '{block}.dnsConfig.nameservers.{index}',
    message:
      '{ip} lies in no ipBlock of network.dnsPeers, and the NetworkPolicies let this pod reach DNS only at those peers (on network.dnsPorts): its lookups there would time out; add an ipBlock peer holding it to network.dnsPeers, or leave nameservers to the cluster DNS',
  },
} as const satisfies Record<string, Refusal>;
