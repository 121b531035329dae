// Test infrastructure: a dynamic provisioner for the local cluster's
// StorageClasses. It watches claims the PV controller hands to it, creates a
// hostPath PersistentVolume pre-bound to each, and deletes Released volumes,
// so PVCs go Pending -> Bound exactly as with a real CSI driver.
//
// Every real node shares this machine's filesystem, so a volume's folder is the
// same on each, as an NFS export is for its clients. The class's parameter
// rlmesh.dev/volume says what a claim gets (test/cluster/up makes one class of each):
//   movable     (standard, the default) ReadWriteOnce, usable from any node, one at a time,
//               as a cloud block volume that detaches and follows its pod
//   node-local  (node-local) ReadWriteOnce, bound to the node the scheduler picked for the
//               first consumer (WaitForFirstConsumer), as a local disk: lost with that node
//   shared      (shared-rwx) ReadWriteMany, as NFS, CephFS or EFS
// A claim for ReadWriteMany or ReadOnlyMany on a class without it is refused with an Event,
// as a block storage driver refuses it.
import { chmodSync, mkdirSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';

const PROVISIONER = 'rlmesh.dev/local-test-provisioner';
const root = process.argv[2] ?? '/tmp/rlmesh-volumes';

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(k8s.CoreV1Api);
const storage = kc.makeApiClient(k8s.StorageV1Api);

async function provision(pvc: k8s.V1PersistentVolumeClaim): Promise<void> {
  const ns = pvc.metadata!.namespace!;
  const name = pvc.metadata!.name!;
  const annotations = pvc.metadata?.annotations ?? {};
  if (pvc.status?.phase !== 'Pending' || pvc.spec?.volumeName) return;
  if (annotations['volume.kubernetes.io/storage-provisioner'] !== PROVISIONER) return;
  const className = pvc.spec?.storageClassName;
  if (!className) return;
  const sc = await storage.readStorageClass({ name: className });
  const kind = sc.parameters?.['rlmesh.dev/volume'] ?? 'movable';
  const accessModes = pvc.spec?.accessModes ?? ['ReadWriteOnce'];
  const pvName = `pvc-${pvc.metadata!.uid}`;
  if (kind !== 'shared' && accessModes.some((m) => m === 'ReadWriteMany' || m === 'ReadOnlyMany')) {
    return refuse(pvc, `StorageClass ${className} gives ${kind} ReadWriteOnce volumes, not ${accessModes.join(', ')}: use the class shared-rwx`);
  }
  const node = annotations['volume.kubernetes.io/selected-node'];
  if (kind === 'node-local' && !node) return; // WaitForFirstConsumer: the scheduler names the node first
  // the kubelet applies no fsGroup to a hostPath volume: as local-path-provisioner does, the folder is
  // writable by every user, so pods running as a non-root user (the chart's run as 65532) can write to it
  const path = `${root}/${pvName}`;
  mkdirSync(path, { recursive: true });
  chmodSync(path, 0o777);
  try {
    await core.createPersistentVolume({
      body: {
        metadata: { name: pvName, annotations: { 'pv.kubernetes.io/provisioned-by': PROVISIONER } },
        spec: {
          capacity: { storage: pvc.spec?.resources?.requests?.storage ?? '1Gi' },
          accessModes,
          persistentVolumeReclaimPolicy: sc.reclaimPolicy ?? 'Delete',
          storageClassName: className,
          volumeMode: pvc.spec?.volumeMode ?? 'Filesystem',
          claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ns, name, uid: pvc.metadata!.uid! },
          hostPath: { path, type: 'Directory' },
          ...(kind === 'node-local' ? { nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [node!] }] }] } } } : {}),
        },
      },
    });
    console.log(`provisioned ${kind} ${pvName} for ${ns}/${name}${kind === 'node-local' ? ` on node ${node}` : ''}`);
  } catch (err) {
    if ((err as { code?: number }).code !== 409) console.error(`provisioning ${ns}/${name} failed: ${String(err)}`);
  }
}

const refused = new Set<string>();
async function refuse(pvc: k8s.V1PersistentVolumeClaim, message: string): Promise<void> {
  if (refused.has(pvc.metadata!.uid!)) return;
  refused.add(pvc.metadata!.uid!);
  const ns = pvc.metadata!.namespace!;
  await core.createNamespacedEvent({
    namespace: ns,
    body: {
      metadata: { generateName: `${pvc.metadata!.name}.`, namespace: ns },
      involvedObject: { kind: 'PersistentVolumeClaim', apiVersion: 'v1', namespace: ns, name: pvc.metadata!.name!, uid: pvc.metadata!.uid! },
      type: 'Warning',
      reason: 'ProvisioningFailed',
      message,
      source: { component: PROVISIONER },
      firstTimestamp: new Date(),
      lastTimestamp: new Date(),
      count: 1,
    },
  });
  console.error(`refused ${ns}/${pvc.metadata!.name}: ${message}`);
}

async function reclaim(pv: k8s.V1PersistentVolume): Promise<void> {
  if (pv.status?.phase !== 'Released') return;
  if (pv.metadata?.annotations?.['pv.kubernetes.io/provisioned-by'] !== PROVISIONER) return;
  if (pv.spec?.persistentVolumeReclaimPolicy !== 'Delete') return;
  await core.deletePersistentVolume({ name: pv.metadata!.name! }).catch(() => undefined);
  console.log(`deleted released volume ${pv.metadata!.name}`);
}

function watch<T extends k8s.KubernetesObject>(path: string, list: () => Promise<k8s.KubernetesListObject<T>>, handle: (o: T) => Promise<void>): void {
  const informer = k8s.makeInformer<T>(kc, path, list);
  const run = (o: T) => void handle(o).catch((err) => console.error(String(err)));
  informer.on('add', run);
  informer.on('update', run);
  informer.on('error', () => setTimeout(() => void informer.start(), 1000));
  void informer.start();
}

watch('/api/v1/persistentvolumeclaims', () => core.listPersistentVolumeClaimForAllNamespaces(), provision);
watch('/api/v1/persistentvolumes', () => core.listPersistentVolume(), reclaim);
console.log(`provisioner ${PROVISIONER} running, volumes under ${root}`);
