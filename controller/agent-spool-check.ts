// The agent's spool on a lost node. When the agent's node dies, Kubernetes
// starts the agent on another node; a spool on storage bound to one node (a
// local disk) cannot follow it, so the new pod stays Pending, and the agent,
// the only component that speaks to the platform, cannot say why. The
// controller, which runs elsewhere, says it in one log line.
import type { CoreV1Api, ObjectCache, V1Node, V1PersistentVolume, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { NAMES } from '../lib/fixed-names.ts';
import { errorMessage } from '../lib/error-fields.ts';

const AGENT_SELECTOR = 'app.kubernetes.io/name=rlmesh-cluster-agent';
/** how often a line already said is said again while the agent stays stuck */
const REPEAT_MS = 10 * 60_000;

/** The nodes a volume's required node affinity allows when it names them by hostname alone (a local disk); undefined when it may move. */
export function boundNodes(pv: Pick<V1PersistentVolume, 'spec'>): string[] | undefined {
  const terms = pv.spec?.nodeAffinity?.required?.nodeSelectorTerms;
  if (!terms?.length) return undefined;
  const names: string[] = [];
  for (const t of terms) {
    const host = t.matchExpressions?.find((e) => e.key === 'kubernetes.io/hostname' && e.operator === 'In');
    if (!host?.values?.length) return undefined;
    names.push(...host.values);
  }
  return names;
}

const ready = (node: Pick<V1Node, 'status'> | undefined): boolean => node?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

/** The line to log when an unscheduled agent pod waits for a spool volume that only lost nodes can mount, else undefined. */
export function stuckSpoolLine(pod: V1Pod, pv: Pick<V1PersistentVolume, 'metadata' | 'spec'>, node: (name: string) => Pick<V1Node, 'status'> | undefined): string | undefined {
  const unscheduled = !pod.spec?.nodeName && pod.status?.conditions?.some((c) => c.type === 'PodScheduled' && c.status === 'False');
  if (!unscheduled) return undefined;
  const bound = boundNodes(pv);
  if (!bound || bound.some((n) => ready(node(n)))) return undefined;
  const where = bound.join(', ');
  return (
    `the agent cannot start (pod ${pod.metadata?.name} is unschedulable): its spool, PVC ${NAMES.agentSpoolPvc} on volume ${pv.metadata?.name}, ` +
    `is on storage bound to node ${where}, which is not Ready; until the agent runs, nothing reaches the platform. ` +
    `Bring ${where} back, or delete the PVC and the agent pod to start the agent elsewhere with an empty spool (the updates it had not delivered are lost). ` +
    `Give the spool storage that can move between nodes (a block volume another node can attach, agent.spool.storageClassName; chart README, "Several nodes")`
  );
}

export type AgentSpoolCheckOptions = {
  core: Pick<CoreV1Api, 'listNamespacedPod' | 'readNamespacedPersistentVolumeClaim' | 'readPersistentVolume'>;
  /** the release namespace, where the agent and its spool PVC are */
  namespace: string;
  nodes: ObjectCache<V1Node>;
  log: Logger;
  everyMs?: number;
};

/** Checks every `everyMs` (30 s) whether the agent waits for a spool on a lost node, and logs it; returns its stopper. */
export function startAgentSpoolCheck(o: AgentSpoolCheckOptions): () => void {
  const said = new Map<string, number>();
  const check = async (): Promise<void> => {
    const pods = (await o.core.listNamespacedPod({ namespace: o.namespace, labelSelector: AGENT_SELECTOR })).items.filter((p) => !p.spec?.nodeName);
    if (pods.length === 0) return;
    const pvc = await o.core.readNamespacedPersistentVolumeClaim({ namespace: o.namespace, name: NAMES.agentSpoolPvc });
    const volume = pvc.spec?.volumeName;
    if (!volume) return;
    const pv = await o.core.readPersistentVolume({ name: volume });
    for (const pod of pods) {
      const line = stuckSpoolLine(pod, pv, (n) => o.nodes.get(n));
      const key = `${pod.metadata?.uid}`;
      if (!line || Date.now() - (said.get(key) ?? 0) < REPEAT_MS) continue;
      said.set(key, Date.now());
      o.log.error({ reason: 'AgentSpoolOnLostNode', pod: pod.metadata?.name, volume }, line);
    }
  };
  let failing = false;
  const timer = setInterval(() => {
    check().then(
      () => (failing = false),
      (err: unknown) => {
        // said once per run of failures, not every 30 s
        if (!failing) o.log.warn({ err: errorMessage(err) }, `could not check whether the agent waits for its spool on a lost node: ${errorMessage(err)}; the check retries every ${(o.everyMs ?? 30_000) / 1000} s (if this persists, check the chart's RBAC for ServiceAccount rlmesh-cluster-controller)`);
        failing = true;
      },
    );
  }, o.everyMs ?? 30_000);
  timer.unref();
  return () => clearInterval(timer);
}
