// The error of every malformed or unverifiable signed note, vkey or checkpoint body; its own
// module so the checkpoint body format (below the note) can throw it too.
export class NoteError extends Error {
  override name = 'NoteError';
}
