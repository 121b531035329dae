// The address blocks the proxy never connects to, as data. Rows come from the
// IANA IPv4 and IPv6 Special-Purpose Address Registries (iana-ipv4-special-registry,
// iana-ipv6-special-registry), plus the blocks of the IANA IPv4/IPv6 Address
// Space registries that are not unicast (multicast, deprecated site-local,
// deprecated IPv4-compatible). Every row is refused, including the "globally
// reachable" anycast ones: the proxy only connects to plainly public unicast.
// For IPv6 the classifier additionally refuses everything outside 2000::/3.
//
// `reopenable` rows are the only ones an operator's allow-range may sit in:
// private networks an in-cluster route can legitimately need. Loopback,
// link-local (cloud metadata), multicast, broadcast and every IPv4 embedding
// stay closed whatever the configuration.
// `embedsIPv4` says where an IPv4 address sits inside an IPv6 row (bit offset),
// so a refusal can name the address it hides; such rows are refused wholesale.
// Rows with rule `cloud-metadata` are the clouds' instance metadata and
// platform endpoints, from each provider's documentation. Some sit inside a
// re-openable block (Alibaba's in shared address space, AWS's and Google's IPv6
// ones in unique-local space) and one in public space (Azure's WireServer):
// being more specific than the block, they name the refusal and stay refused
// whatever allow-range re-opens the block around them.

export interface RegistryRow {
  cidr: string;
  /** short stable id: the `rule` in logs, metrics and the refusal header */
  rule: string;
  /** phrase completing "<address> is ..." */
  description: string;
  rfc: string;
  reopenable?: boolean;
  embedsIPv4?: { bitOffset: number; inverted?: boolean }[];
}

export const IPV4_ROWS: readonly RegistryRow[] = [
  { cidr: '0.0.0.0/8', rule: 'this-network', description: '"this network"', rfc: 'RFC 791' },
  { cidr: '0.0.0.0/32', rule: 'this-host', description: '"this host on this network"', rfc: 'RFC 1122' },
  { cidr: '10.0.0.0/8', rule: 'private-use', description: 'private', rfc: 'RFC 1918', reopenable: true },
  { cidr: '100.64.0.0/10', rule: 'shared-address-space', description: 'shared address space (carrier-grade NAT)', rfc: 'RFC 6598', reopenable: true },
  { cidr: '100.100.100.200/32', rule: 'cloud-metadata', description: 'the Alibaba Cloud instance metadata service', rfc: 'Alibaba Cloud ECS documentation' },
  { cidr: '127.0.0.0/8', rule: 'loopback', description: 'loopback', rfc: 'RFC 1122' },
  { cidr: '169.254.0.0/16', rule: 'link-local', description: 'link-local', rfc: 'RFC 3927' },
  { cidr: '169.254.169.254/32', rule: 'cloud-metadata', description: 'the instance metadata service of AWS, Azure, Google Cloud, Oracle Cloud and OpenStack', rfc: 'the providers\' documentation' },
  { cidr: '169.254.170.2/32', rule: 'cloud-metadata', description: 'the Amazon ECS task metadata and credentials endpoint', rfc: 'Amazon ECS documentation' },
  { cidr: '169.254.170.23/32', rule: 'cloud-metadata', description: 'the Amazon EKS Pod Identity agent (IAM credentials)', rfc: 'Amazon EKS documentation' },
  { cidr: '168.63.129.16/32', rule: 'cloud-metadata', description: "Azure's platform endpoint (WireServer: VM agent, extensions, health probes)", rfc: 'Azure documentation' },
  { cidr: '172.16.0.0/12', rule: 'private-use', description: 'private', rfc: 'RFC 1918', reopenable: true },
  { cidr: '192.0.0.0/24', rule: 'ietf-protocol-assignments', description: 'reserved for IETF protocol assignments', rfc: 'RFC 6890' },
  { cidr: '192.0.0.0/29', rule: 'service-continuity', description: 'the IPv4 service continuity prefix', rfc: 'RFC 7335' },
  { cidr: '192.0.0.8/32', rule: 'dummy-address', description: 'the IPv4 dummy address', rfc: 'RFC 7600' },
  { cidr: '192.0.0.9/32', rule: 'anycast-service', description: 'the Port Control Protocol anycast address', rfc: 'RFC 7723' },
  { cidr: '192.0.0.10/32', rule: 'anycast-service', description: 'the TURN anycast address', rfc: 'RFC 8155' },
  { cidr: '192.0.0.170/32', rule: 'nat64-discovery', description: 'a NAT64/DNS64 discovery address', rfc: 'RFC 8880' },
  { cidr: '192.0.0.171/32', rule: 'nat64-discovery', description: 'a NAT64/DNS64 discovery address', rfc: 'RFC 8880' },
  { cidr: '192.0.2.0/24', rule: 'documentation', description: 'documentation, TEST-NET-1', rfc: 'RFC 5737' },
  { cidr: '192.31.196.0/24', rule: 'anycast-service', description: 'AS112 anycast', rfc: 'RFC 7535' },
  { cidr: '192.52.193.0/24', rule: 'anycast-service', description: 'AMT anycast', rfc: 'RFC 7450' },
  { cidr: '192.88.99.0/24', rule: '6to4-relay-anycast', description: 'the deprecated 6to4 relay anycast block', rfc: 'RFC 7526' },
  { cidr: '192.88.99.2/32', rule: '6to4-relay-anycast', description: 'the 6a44 relay anycast address', rfc: 'RFC 6751' },
  { cidr: '192.168.0.0/16', rule: 'private-use', description: 'private', rfc: 'RFC 1918', reopenable: true },
  { cidr: '192.175.48.0/24', rule: 'anycast-service', description: 'AS112 direct delegation', rfc: 'RFC 7534' },
  { cidr: '198.18.0.0/15', rule: 'benchmarking', description: 'benchmarking', rfc: 'RFC 2544', reopenable: true },
  { cidr: '198.51.100.0/24', rule: 'documentation', description: 'documentation, TEST-NET-2', rfc: 'RFC 5737' },
  { cidr: '203.0.113.0/24', rule: 'documentation', description: 'documentation, TEST-NET-3', rfc: 'RFC 5737' },
  { cidr: '224.0.0.0/4', rule: 'multicast', description: 'multicast', rfc: 'RFC 5771' },
  { cidr: '240.0.0.0/4', rule: 'reserved', description: 'reserved for future use', rfc: 'RFC 1112' },
  { cidr: '255.255.255.255/32', rule: 'broadcast', description: 'the limited broadcast address', rfc: 'RFC 919' },
];

const LAST_32 = [{ bitOffset: 96 }];

export const IPV6_ROWS: readonly RegistryRow[] = [
  { cidr: '::/128', rule: 'unspecified', description: 'the unspecified address', rfc: 'RFC 4291' },
  { cidr: '::1/128', rule: 'loopback', description: 'loopback', rfc: 'RFC 4291' },
  { cidr: '::/96', rule: 'ipv4-compatible', description: 'an IPv4-compatible address (deprecated)', rfc: 'RFC 4291', embedsIPv4: LAST_32 },
  { cidr: '::ffff:0:0/96', rule: 'ipv4-mapped', description: 'an IPv4-mapped address', rfc: 'RFC 4291', embedsIPv4: LAST_32 },
  { cidr: '::ffff:0:0:0/96', rule: 'ipv4-translated', description: 'an IPv4-translated address', rfc: 'RFC 2765', embedsIPv4: LAST_32 },
  { cidr: '64:ff9b::/96', rule: 'nat64', description: 'a NAT64 well-known-prefix address', rfc: 'RFC 6052', embedsIPv4: LAST_32 },
  { cidr: '64:ff9b:1::/48', rule: 'nat64', description: 'a NAT64 local-use-prefix address', rfc: 'RFC 8215', embedsIPv4: LAST_32 },
  { cidr: '100::/64', rule: 'discard-only', description: 'discard-only', rfc: 'RFC 6666' },
  { cidr: '100:0:0:1::/64', rule: 'dummy-address', description: 'the dummy IPv6 prefix', rfc: 'RFC 9780' },
  { cidr: '2001::/23', rule: 'ietf-protocol-assignments', description: 'reserved for IETF protocol assignments', rfc: 'RFC 2928' },
  {
    cidr: '2001::/32', rule: 'teredo', description: 'a Teredo address', rfc: 'RFC 4380',
    embedsIPv4: [{ bitOffset: 32 }, { bitOffset: 96, inverted: true }],
  },
  { cidr: '2001:1::1/128', rule: 'anycast-service', description: 'the Port Control Protocol anycast address', rfc: 'RFC 7723' },
  { cidr: '2001:1::2/128', rule: 'anycast-service', description: 'the TURN anycast address', rfc: 'RFC 8155' },
  { cidr: '2001:1::3/128', rule: 'anycast-service', description: 'the DNS-SD service registration anycast address', rfc: 'RFC 9665' },
  { cidr: '2001:2::/48', rule: 'benchmarking', description: 'benchmarking', rfc: 'RFC 5180', reopenable: true },
  { cidr: '2001:3::/32', rule: 'anycast-service', description: 'AMT anycast', rfc: 'RFC 7450' },
  { cidr: '2001:4:112::/48', rule: 'anycast-service', description: 'AS112 anycast', rfc: 'RFC 7535' },
  { cidr: '2001:10::/28', rule: 'orchid', description: 'ORCHID (deprecated)', rfc: 'RFC 4843' },
  { cidr: '2001:20::/28', rule: 'orchid', description: 'ORCHIDv2', rfc: 'RFC 7343' },
  { cidr: '2001:30::/28', rule: 'drone-remote-id', description: 'a drone remote ID entity tag', rfc: 'RFC 9374' },
  { cidr: '2001:db8::/32', rule: 'documentation', description: 'documentation', rfc: 'RFC 3849' },
  { cidr: '2002::/16', rule: '6to4', description: 'a 6to4 address', rfc: 'RFC 3056', embedsIPv4: [{ bitOffset: 16 }] },
  { cidr: '2620:4f:8000::/48', rule: 'anycast-service', description: 'AS112 direct delegation', rfc: 'RFC 7534' },
  { cidr: '3fff::/20', rule: 'documentation', description: 'documentation', rfc: 'RFC 9637' },
  { cidr: '5f00::/16', rule: 'srv6-sid', description: 'a segment routing (SRv6) SID', rfc: 'RFC 9602' },
  { cidr: 'fc00::/7', rule: 'unique-local', description: 'unique-local (private)', rfc: 'RFC 4193', reopenable: true },
  { cidr: 'fd00:ec2::254/128', rule: 'cloud-metadata', description: 'the AWS instance metadata service (IPv6)', rfc: 'Amazon EC2 documentation' },
  { cidr: 'fd00:ec2::23/128', rule: 'cloud-metadata', description: 'the Amazon EKS Pod Identity agent (IPv6)', rfc: 'Amazon EKS documentation' },
  { cidr: 'fd20:ce::254/128', rule: 'cloud-metadata', description: 'the Google Cloud metadata server (IPv6)', rfc: 'Google Cloud documentation' },
  { cidr: 'fd00:c1::a9fe:a9fe/128', rule: 'cloud-metadata', description: 'the Oracle Cloud instance metadata service (IPv6)', rfc: 'Oracle Cloud documentation' },
  { cidr: 'fe80::/10', rule: 'link-local', description: 'link-local', rfc: 'RFC 4291' },
  { cidr: 'fec0::/10', rule: 'site-local', description: 'site-local (deprecated)', rfc: 'RFC 3879' },
  { cidr: 'ff00::/8', rule: 'multicast', description: 'multicast', rfc: 'RFC 4291' },
];

/** IANA IPv6 Address Space: only 2000::/3 is allocated as global unicast. */
export const IPV6_GLOBAL_UNICAST = '2000::/3';
export const IPV6_OUTSIDE_GLOBAL_UNICAST: RegistryRow = {
  cidr: '::/0',
  rule: 'not-global-unicast',
  description: 'outside the global unicast space 2000::/3',
  rfc: 'RFC 4291',
};
