/**
 * `idKey`: what to keep of an id held for long (a map key, a list of ids seen). A lowercase UUID
 * becomes its 16 bytes in a 16-character string; any other id a flat copy of its text with a
 * character no packed UUID holds (U+0100), so the two kinds never meet. Never the id string itself:
 * an id built from slices of a hash keeps every piece alive, and one sliced out of a message keeps
 * the whole message.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function idKey(id: string): string {
  if (UUID.test(id)) return Buffer.from(id.replace(/-/g, ''), 'hex').toString('latin1');
  // UTF-16 both ways copies every code unit as it is (lone surrogates included).
  return Buffer.from(`${id}\u0100`, 'utf16le').toString('utf16le');
}
