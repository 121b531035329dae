// Whether evaluation pods may start: only once the NetworkPolicy probe has
// seen enforcement (fail closed). Until then (probe failed, not finished, off)
// new evaluations wait with a reason that names the prerequisite and the fix,
// unless the operator set evaluations.runWithoutNetworkPolicyEnforcement.
import type { CheckResult } from '../lib/preflight/types.ts';
import type { NetworkGate } from './pod-spec.ts';

/** The longest the probe waits before running again while it has not seen enforcement (hourly once it has). */
export const UNENFORCED_REPROBE_MS = 60_000;

export type FenceDecision = { start: true; gate?: NetworkGate } | { start: false; message: string };

const PREREQUISITE =
  'evaluation pods start only where NetworkPolicy is enforced (the prerequisite: a CNI that enforces it, such as Calico, Cilium or kube-router), ' +
  'because without enforcement nothing keeps them from the cluster network, the API server or cloud metadata';
const OPT_OUT = 'if another layer fences rlmesh-runs, set the chart value evaluations.runWithoutNetworkPolicyEnforcement=true';

export class NetworkFence {
  #seen: CheckResult | undefined;
  readonly #probeEnabled: boolean;
  readonly #optOut: boolean;
  readonly #gate: () => NetworkGate | undefined;

  /** `gate`: the network-ready init container for new pods, when it can be built (the probe image and targets are known). */
  constructor(o: { probeEnabled: boolean; runWithoutEnforcement: boolean; gate: () => NetworkGate | undefined; stored?: CheckResult }) {
    this.#probeEnabled = o.probeEnabled;
    this.#optOut = o.runWithoutEnforcement;
    this.#gate = o.gate;
    this.#seen = o.stored;
  }

  get enforced(): boolean {
    return this.#probeEnabled && this.#seen?.verdict === 'pass';
  }

  /** Records a probe result; true when enforcement has just been seen (evaluations waiting for it may start). */
  observe(result: CheckResult): boolean {
    const before = this.enforced;
    this.#seen = result;
    return !before && this.enforced;
  }

  decide(): FenceDecision {
    if (this.enforced) {
      const gate = this.#gate();
      if (gate) return { start: true, gate };
      // the gate proves each pod's own policies; without it enforcement is only the probe's word
      if (!this.#optOut) return { start: false, message: `NetworkPolicy is enforced, but the controller cannot build the network-ready check for new pods (no probe image, or no KUBERNETES_SERVICE_HOST); ${PREREQUISITE}. Check the controller's runtime config (preflight.networkPolicyProbe.image) and its log` };
      return { start: true };
    }
    if (this.#optOut) return { start: true };
    return { start: false, message: `${this.#why()}; ${PREREQUISITE}. ${this.#fix()}; ${OPT_OUT}` };
  }

  #why(): string {
    if (!this.#probeEnabled) return 'NetworkPolicy enforcement is not verified in this cluster: the probe is off (preflight.networkPolicyProbe.enabled=false)';
    if (!this.#seen) return 'NetworkPolicy enforcement has not been seen yet: the controller\'s first probe has not finished';
    return `NetworkPolicy enforcement has not been seen: the probe found ${this.#seen.found}`;
  }

  #fix(): string {
    if (!this.#probeEnabled) return 'Turn the probe on (preflight.networkPolicyProbe.enabled=true) with a CNI that enforces NetworkPolicy; this evaluation starts once the probe sees enforcement';
    const fix = this.#seen?.fix ? `${this.#seen.fix.replace(/\.$/, '')}. ` : '';
    return `${fix}The controller probes again within ${UNENFORCED_REPROBE_MS / 1000} s and starts this evaluation once enforcement is seen (kubectl -n rlmesh-system get configmap rlmesh-network-policy-probe -o jsonpath='{.data.summary}')`;
  }
}
