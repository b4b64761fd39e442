/**
 * What `/_emu/workspace` answers (and the GUI's Snippets page shows): which folder became which version,
 * the load error of a refused save, and every entry the loader did not read, with the reason.
 */
export { FolderProblem, FolderStatus, WorkspaceView } from '../../contract/schemas/workspace';
