// templates/_egress-public-blocks.tpl: the public ipBlocks of the egress proxy's
// and the agent's NetworkPolicies (and of Prometheus's in the observability
// chart), derived from the registry rows the proxy itself refuses
// (lib/network-policy-ranges.ts over lib/special-purpose-registry.ts), and the
// addresses an allow-range's ipBlock excepts because the proxy refuses them
// inside any re-opened block.
import { CLOSED_INSIDE_REOPENABLE, NON_PUBLIC_RANGES } from '../../lib/network-policy-ranges.ts';

const list = (cidrs: string[], indent: string): string => cidrs.map((c) => `${indent}- ${c}\n`).join('');

export function egressPublicBlocksTemplate(name = 'rlmesh.egressPublicBlocks'): string {
  return (
    '{{/* Generated from lib/special-purpose-registry.ts by `npm run generate`; do not edit. */}}\n' +
    '{{/* The public addresses: every registry row the egress proxy refuses is excepted */}}\n' +
    `{{- define "${name}" -}}\n` +
    '- ipBlock:\n' +
    '    cidr: 0.0.0.0/0\n' +
    '    # private, loopback, link-local, CGNAT, documentation, benchmarking, anycast, multicast, reserved\n' +
    '    except:\n' +
    list(NON_PUBLIC_RANGES.ipv4, '      ') +
    '- ipBlock:\n' +
    '    # global unicast only (ULA, link-local, multicast, NAT64, IPv4-mapped stay shut), minus\n' +
    '    # Teredo/IETF, documentation, 6to4, AS112 and the new documentation block\n' +
    `    cidr: ${NON_PUBLIC_RANGES.ipv6Cidr}\n` +
    '    except:\n' +
    list(NON_PUBLIC_RANGES.ipv6, '      ').replace(/\n$/, '') +
    '\n{{- end }}\n' +
    '{{/* The except list of an allow-range\'s ipBlock (the CIDR as written, canonical IPv6): the cloud metadata addresses inside it */}}\n' +
    '{{- define "rlmesh.allowRangeExcept" -}}\n' +
    '{{- $cidr := . }}\n' +
    Object.entries(CLOSED_INSIDE_REOPENABLE)
      .map(([address, supernets]) => `{{- if has $cidr (list ${supernets.map((s) => `"${s}"`).join(' ')}) }}\n- ${address}\n{{- end }}\n`)
      .join('') +
    '{{- end }}\n'
  );
}

export async function outputs(): Promise<Record<string, string>> {
  return {
    'charts/rlmesh-runtime/templates/_egress-public-blocks.tpl': egressPublicBlocksTemplate(),
    'charts/rlmesh-observability/templates/_public-blocks.tpl': egressPublicBlocksTemplate('obs.publicBlocks'),
  };
}
