// The reconciler role, once it leads: informers on evaluations, their pods, the
// caches and the nodes; one work queue turning each evaluation into its pod, status,
// Events, deadline, cancellation and garbage collection; and the NetworkPolicy
// probe without whose word no evaluation pod starts (controller/network-fence.ts);
// and the check that says when the agent waits for its spool on a lost node.
import { startAgentSpoolCheck } from './agent-spool-check.ts';
import { EvaluationReconciler } from './evaluation-reconciler.ts';
import { EventRecorder } from './events.ts';
import { CacheNodeReader } from './cache-node-reader.ts';
import { EVALUATION } from '../lib/crds/types.ts';
import { keyOf } from './informers.ts';
import { defaultProbeTargets, gateTargets, GATE_GRACE_SECONDS, startNetworkPolicyProbeLoop, storedProbe } from './network-policy-probe.ts';
import { NetworkFence, UNENFORCED_REPROBE_MS } from './network-fence.ts';
import { resolveProxyUrl } from './proxy-address.ts';
import { DEFAULT_START_DEADLINE_SECONDS } from '../lib/runtime-config.ts';
import { meteredQueue, type RoleContext } from './role-context.ts';
import { lostNode } from './pod-disruption.ts';
import { NO_PLACEMENT } from '../lib/evaluation-placement.ts';
import { decideHostUsers, runtimeHandler, userNamespaceSupport } from '../lib/user-namespaces.ts';

export async function startReconcilerRole(c: RoleContext): Promise<void> {
  const { core, custom, config, kc, log, metrics, flags } = c;
  const runs = config.runsNamespace;
  // the queue only runs once started, after the reconciler below exists
  const q = meteredQueue(c, 'evaluations', (key) => reconciler.reconcile(key));
  const evaluations = c.informers.evaluations((ev) => q.add(keyOf(ev)));
  // capacity freed (a pod finished or went away, the cache node became known): evaluations
  // that are Waiting try again; everything else is driven by its own object's events
  const requeueWaiting = (): void => {
    for (const ev of evaluations.cache.list(runs)) if (ev.status?.phase === 'Waiting') q.add(keyOf(ev));
  };
  const finishedPods = new Set<string>();
  const pods = c.informers.managedPods((pod, verb) => {
    const owner = pod.metadata?.ownerReferences?.find((o) => o.kind === EVALUATION.kind);
    if (owner) q.add(`${pod.metadata?.namespace}/${owner.name}`);
    const name = pod.metadata?.name ?? '';
    const finished = pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
    if (verb === 'delete') finishedPods.delete(name);
    if (verb === 'delete' || (finished && !finishedPods.has(name))) {
      if (finished) finishedPods.add(name);
      requeueWaiting();
    }
  });
  const caches = c.informers.caches(() => requeueWaiting());
  // a node that stopped reporting takes its pods' evaluations with it: each is looked at again
  const nodes = c.informers.nodes((node) => {
    if (!lostNode(node)) return;
    for (const pod of pods.cache.list(runs)) {
      const owner = pod.spec?.nodeName === node.metadata?.name ? pod.metadata?.ownerReferences?.find((o) => o.kind === EVALUATION.kind) : undefined;
      if (owner) q.add(`${pod.metadata?.namespace}/${owner.name}`);
    }
  });
  c.onStop(() => evaluations.stop(), () => pods.stop(), () => caches.stop(), () => nodes.stop(), () => q.stop());
  await Promise.all([evaluations.synced, pods.synced, caches.synced, nodes.synced]);
  // no evaluation pod starts until the probe has seen NetworkPolicy enforced; then each waits in
  // an init container until its own policies are in place
  const probe = config.preflight?.networkPolicyProbe;
  const proxyUrl = await resolveProxyUrl(core, config.egress.proxyUrl, log);
  log.info({ proxyUrl }, 'evaluation pods reach the egress proxy by its ClusterIP');
  const stored = probe?.enabled ? await storedProbe(kc, config.namespace) : undefined;
  const fence = new NetworkFence({
    probeEnabled: probe?.enabled ?? false,
    runWithoutEnforcement: config.evaluations?.runWithoutNetworkPolicyEnforcement ?? false,
    ...(stored ? { stored } : {}),
    gate: () => {
      const targets = gateTargets(proxyUrl);
      return probe?.image && targets ? { image: probe.image, ...targets, graceSeconds: GATE_GRACE_SECONDS } : undefined;
    },
  });
  if (config.evaluations?.runWithoutNetworkPolicyEnforcement && !fence.enforced) {
    log.warn('evaluations.runWithoutNetworkPolicyEnforcement=true: evaluation pods start although NetworkPolicy enforcement has not been seen');
  }
  // the operator's pull Secrets for private registries, each for its repository prefixes (named on pods, never read)
  const extraPullSecrets = config.evaluations?.imagePullSecrets ?? [];
  if (extraPullSecrets.length > 0) log.info({ pullSecrets: extraPullSecrets }, 'evaluation pods get the pull Secrets of evaluations.imagePullSecrets mapped to their images');
  // evaluations.hostUsers: user namespaces where every node evaluations may use supports them (auto), or required (false)
  const placement = config.evaluations?.placement ?? NO_PLACEMENT;
  const handler = await runtimeHandler(kc, placement.runtimeClassName);
  const hostUsersSetting = config.evaluations?.hostUsers ?? 'auto';
  const hostUsers = () => decideHostUsers(hostUsersSetting, () => userNamespaceSupport(nodes.cache.list(), placement, handler));
  const users = hostUsers();
  if ('wait' in users) log.warn({ reason: 'UserNamespacesUnsupported' }, users.wait);
  else log.info({ hostUsers: users.hostUsers ?? true }, users.found);
  const reconciler = new EvaluationReconciler({
    core,
    custom,
    evaluations: evaluations.cache,
    pods: pods.cache,
    caches: caches.cache,
    nodes: nodes.cache,
    events: new EventRecorder(core, 'rlmesh-cluster-controller', c.identity, log, { commonLabels: config.pods?.commonLabels }),
    cacheNodes: new CacheNodeReader({ core, log }),
    metrics,
    log,
    settings: {
      namespace: runs,
      pullSecret: config.credentials.pullSecret,
      ...(extraPullSecrets.length > 0 ? { extraPullSecrets } : {}),
      proxyUrl,
      networkFence: () => fence.decide(),
      cacheName: config.artifactCache.cacheName,
      pvcName: config.artifactCache.pvcName,
      accessModes: config.artifactCache.accessModes,
      gcAfterMs: flags['gc-after-seconds'] * 1000,
      waitingRetryMs: flags['waiting-retry-seconds'] * 1000,
      startDeadlineSeconds: config.evaluations?.startDeadlineSeconds ?? DEFAULT_START_DEADLINE_SECONDS,
      ...(flags['max-concurrent'] ? { maxConcurrent: flags['max-concurrent'] } : {}),
      ...(config.evaluations?.placement ? { placement: config.evaluations.placement } : {}),
      ...(config.pods?.arbitraryUid ? { arbitraryUid: true } : {}),
      hostUsers,
      commonLabels: config.pods?.commonLabels,
      ...(config.pods?.imagePullSecrets?.length ? { runtimePullSecrets: config.pods.imagePullSecrets.map((p) => p.name) } : {}),
    },
  });
  q.start();
  for (const ev of evaluations.cache.list(runs)) q.add(keyOf(ev));
  log.info({ namespace: runs }, 'evaluation reconciler started');
  c.onStop(startAgentSpoolCheck({ core, namespace: config.namespace, nodes: nodes.cache, log }));
  // preflight: does the CNI enforce NetworkPolicy? (result read by the agent's preflight)
  if (probe?.enabled) {
    const stop = startNetworkPolicyProbeLoop({
      kc,
      namespace: config.namespace,
      runsNamespace: runs,
      image: probe.image,
      // the probe may run before the join wrote the pull Secret: the join token's pulls the runtime image until then
      pullSecrets: [config.credentials.pullSecret, config.credentials.joinPullSecret].filter(Boolean),
      targets: defaultProbeTargets(proxyUrl, c.metricsPort),
      ...(config.pods ? { pods: config.pods } : {}),
      placement,
      log,
      active: c.leading,
      retryMs: UNENFORCED_REPROBE_MS,
      onResult: (r) => {
        if (fence.observe(r)) requeueWaiting();
      },
    });
    c.onStop(stop);
  }
}
