// The CAs the agent's connections to the control plane trust (GET /v1/info, the
// join, the session, preflight's TLS checks). Node's `ca` option replaces the
// roots it trusts by default, so a bundle passed alone would pin it; as the chart
// documents controlPlane.caBundle, the bundle is added to the default roots (Node's
// bundled ones and NODE_EXTRA_CA_CERTS, which the chart points at the same file)
// unless controlPlane.pinCaBundle asks for the bundle alone.
import { getCACertificates } from 'node:tls';

/** The PEM to pass as `ca`, or undefined for Node's default roots (no bundle). */
export function controlPlaneCa(bundle: string | undefined, pinned: boolean): string | undefined {
  if (bundle === undefined) return undefined;
  return pinned ? bundle : [...getCACertificates('default'), bundle].join('\n');
}
