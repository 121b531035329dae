// Finds the node's GPUs in sysfs: PCI display controllers (class 0x03xxxx) from
// NVIDIA or AMD. Readable without privileges or host mounts: a container sees
// the node's /sys/bus/pci read-only.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PCI_VENDORS, type Vendor } from './gpu-models.ts';

export type GpuDevice = { address: string; vendor: Vendor; deviceId: string; vramBytes?: number };

const read = (path: string): Promise<string | undefined> => readFile(path, 'utf8').then((s) => s.trim(), () => undefined);

export async function findGpus(sysfsRoot = '/sys'): Promise<GpuDevice[]> {
  const dir = join(sysfsRoot, 'bus/pci/devices');
  const addresses = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [] as string[];
    throw new Error(`cannot list ${dir}: ${err.message}; GPU discovery needs the node's sysfs (it is visible in every container)`);
  });
  const gpus: GpuDevice[] = [];
  for (const address of addresses.sort()) {
    const [vendorId, classId, deviceId] = await Promise.all(['vendor', 'class', 'device'].map((f) => read(join(dir, address, f))));
    const vendor = PCI_VENDORS[vendorId as keyof typeof PCI_VENDORS];
    if (!vendor || !deviceId || !classId?.startsWith('0x03')) continue;
    // amdgpu reports VRAM; NVIDIA's driver does not (the model table has it)
    const vram = await read(join(dir, address, 'mem_info_vram_total'));
    gpus.push({ address, vendor, deviceId, ...(vram && /^\d+$/.test(vram) ? { vramBytes: Number(vram) } : {}) });
  }
  return gpus;
}
