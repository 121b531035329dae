// Text that someone else wrote (a kubelet message, what the platform said, an
// object's field), made safe to print on a terminal: escape sequences (CSI, OSC,
// and the other ESC forms) are dropped whole, and every other C0 or C1 control
// character (newlines and tabs among them: the layout's line breaks are the
// printer's own) becomes a space, so that no such text can move the cursor,
// rewrite what was printed before it, set the window title or hide a line.

// ESC [ … final byte; ESC ] … BEL or ST; ESC P/X/^/_ … ST (DCS, SOS, PM, APC); ESC and one byte
// (their 8-bit C1 forms too: CSI U+009B, OSC U+009D, DCS U+0090, SOS U+0098, PM U+009E, APC U+009F)
const SEQUENCE = /(?:\u001b\[|\u009b)[\u0030-\u003f]*[\u0020-\u002f]*[\u0040-\u007e]?|(?:\u001b[\]PX^_]|[\u009d\u0090\u0098\u009e\u009f])[^\u0007\u001b\u009c]*(?:\u0007|\u001b\\|\u009c)?|\u001b[\u0020-\u007e]?/g;
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

export function printable(text: string): string {
  return text.replace(SEQUENCE, '').replace(CONTROL, ' ');
}
