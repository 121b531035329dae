// Reasons an evaluation's status carries that more than one component reads.

/** An evaluation waits with this reason while NetworkPolicy enforcement is not confirmed (controller/network-fence.ts). */
export const NOT_ENFORCED_REASON = 'NetworkPolicyNotEnforced';
