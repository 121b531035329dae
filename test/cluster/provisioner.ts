// Test infrastructure: a dynamic provisioner for the local cluster's default
// StorageClass. It watches claims the PV controller hands to it, creates a
// hostPath PersistentVolume pre-bound to each, and deletes Released volumes,
// so PVCs go Pending -> Bound exactly as with a real CSI driver.
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
  const pvName = `pvc-${pvc.metadata!.uid}`;
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
          accessModes: pvc.spec?.accessModes ?? ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: sc.reclaimPolicy ?? 'Delete',
          storageClassName: className,
          volumeMode: pvc.spec?.volumeMode ?? 'Filesystem',
          claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ns, name, uid: pvc.metadata!.uid! },
          hostPath: { path, type: 'Directory' },
        },
      },
    });
    console.log(`provisioned ${pvName} for ${ns}/${name}`);
  } catch (err) {
    if ((err as { code?: number }).code !== 409) console.error(`provisioning ${ns}/${name} failed: ${String(err)}`);
  }
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
