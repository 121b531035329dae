// A DNS hostname as the egress allow-list and the platform's output hosts take it:
// labels of lowercase letters, digits and '-' (punycode for other letters), at most
// 63 characters each, 253 in all.
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

export function isHostname(name: string): boolean {
  return name.length <= 253 && name.split('.').every((label) => LABEL.test(label));
}

// What a host may contain before normalisation: the hostname alphabet, dots, and
// non-ASCII letters for internationalised names (punycoded later). Percent signs,
// slashes, backslashes, underscores, spaces and the like are refused rather than
// left to a URL or IDNA parser to reinterpret or cut short.
export const RAW_HOST = /^[a-zA-Z0-9.\-\u0080-\uffff]+$/u;
