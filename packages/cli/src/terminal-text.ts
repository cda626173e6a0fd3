/**
 * Text from elsewhere (an edge's refusal or close reason, a client's request path) as it may be written to a
 * terminal: every control character (C0, DEL, C1) shown as `\xNN`. Written raw, an escape sequence would be
 * the terminal's to obey (OSC 52 sets the clipboard, CSI 2J clears the screen) and a newline would forge a
 * line of ours; what is left is still readable and says something odd was sent.
 */
export function terminalSafe(text: string): string {
  return text.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

// Built from a string: the linter refuses control characters in a regex literal.
const char = String.fromCharCode;
const CONTROL = new RegExp(`[${char(0)}-${char(0x1f)}${char(0x7f)}-${char(0x9f)}]`, 'g');
