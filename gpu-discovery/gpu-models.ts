// PCI device ids of common data-centre GPUs -> product name and memory. The
// kernel exposes only ids; NVIDIA publishes no memory size in sysfs, so the
// table carries it. An id not listed still gets vendor and count labels, and a
// product label made from the id.
export type GpuModel = { product: string; memoryMiB: number };

export const PCI_VENDORS = { '0x10de': 'nvidia', '0x1002': 'amd' } as const;
export type Vendor = (typeof PCI_VENDORS)[keyof typeof PCI_VENDORS];

const GiB = 1024;

export const GPU_MODELS: Record<Vendor, Record<string, GpuModel>> = {
  nvidia: {
    '0x20b0': { product: 'NVIDIA-A100-SXM4-40GB', memoryMiB: 40 * GiB },
    '0x20b2': { product: 'NVIDIA-A100-SXM4-80GB', memoryMiB: 80 * GiB },
    '0x20b5': { product: 'NVIDIA-A100-PCIE-80GB', memoryMiB: 80 * GiB },
    '0x20f1': { product: 'NVIDIA-A100-PCIE-40GB', memoryMiB: 40 * GiB },
    '0x2330': { product: 'NVIDIA-H100-SXM5-80GB', memoryMiB: 80 * GiB },
    '0x2331': { product: 'NVIDIA-H100-PCIE-80GB', memoryMiB: 80 * GiB },
    '0x26b5': { product: 'NVIDIA-L40', memoryMiB: 48 * GiB },
    '0x26b9': { product: 'NVIDIA-L40S', memoryMiB: 48 * GiB },
    '0x27b8': { product: 'NVIDIA-L4', memoryMiB: 24 * GiB },
    '0x2236': { product: 'NVIDIA-A10', memoryMiB: 24 * GiB },
    '0x2237': { product: 'NVIDIA-A10G', memoryMiB: 24 * GiB },
    '0x1eb8': { product: 'Tesla-T4', memoryMiB: 16 * GiB },
    '0x1db1': { product: 'Tesla-V100-SXM2-16GB', memoryMiB: 16 * GiB },
    '0x1db4': { product: 'Tesla-V100-PCIE-16GB', memoryMiB: 16 * GiB },
    '0x1db5': { product: 'Tesla-V100-SXM2-32GB', memoryMiB: 32 * GiB },
  },
  amd: {
    '0x74a1': { product: 'AMD-Instinct-MI300X', memoryMiB: 192 * GiB },
    '0x740c': { product: 'AMD-Instinct-MI250X-MI250', memoryMiB: 128 * GiB },
    '0x740f': { product: 'AMD-Instinct-MI210', memoryMiB: 64 * GiB },
    '0x738c': { product: 'AMD-Instinct-MI100', memoryMiB: 32 * GiB },
  },
};
