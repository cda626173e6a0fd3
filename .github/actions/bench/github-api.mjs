// The GitHub REST calls of the bench action: the baseline artifact of the default branch, and the one
// comparison comment on a pull request. Plain fetch against GITHUB_API_URL (https://api.github.com, or a
// GitHub Enterprise Server's, or a local server in the tests) with the workflow's token.

import { readZipEntry } from './unzip.mjs';

/**
 * The hidden first line by which the action finds the comment it wrote before. It names the job's
 * artifact (`artifact-name`, unique in a workflow run), so two jobs of one workflow, a matrix of
 * scenarios, keep a comment each instead of overwriting each other's.
 */
export function commentMarker(key = '') {
  const name = key.replace(/[^\w.-]+/g, '_');
  return name === '' ? '<!-- tunnel2-bench-compare -->' : `<!-- tunnel2-bench-compare ${name} -->`;
}
/** GitHub refuses a comment body over 65,536 characters. */
const MAX_COMMENT = 65_000;

/** A refused call, with GitHub's status: 403 (or 404 on a private repository) is a missing permission. */
export class GitHubError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Says which permission the workflow lacks when GitHub refuses the token (401, 403, 404). */
async function needing(permission, what, task) {
  try {
    return await task();
  } catch (err) {
    if (!(err instanceof GitHubError) || ![401, 403, 404].includes(err.status)) throw err;
    throw new Error(
      `the token cannot ${what} (give the job \`permissions: ${permission}\`, or a github-token that has it): ${err.message}`,
    );
  }
}

export function createGitHub({ apiUrl, repository, token, fetchImpl = fetch }) {
  const base = (apiUrl || 'https://api.github.com').replace(/\/+$/, '');
  async function call(method, path, body) {
    const res = await fetchImpl(path.startsWith('http') ? path : `${base}${path}`, {
      method,
      headers: {
        accept: 'application/vnd.github+json',
        authorization: `Bearer ${token}`,
        'x-github-api-version': '2022-11-28',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'follow',
    });
    if (!res.ok) {
      const text = (await res.text()).slice(0, 300);
      throw new GitHubError(res.status, `${method} ${path}: ${res.status} ${text}`);
    }
    return res;
  }
  const json = async (method, path, body) => (await call(method, path, body)).json();

  return {
    /**
     * The newest unexpired artifact named `name` made on the default branch of this repository (so a pull
     * request's own uploads of the same name are never its baseline); null when there is none yet. The
     * branch name alone does not say it: a pull request from a fork's own `main` runs with head_branch
     * "main", and any fork could then set the baseline; its run's head repository is the fork.
     */
    async findBaselineArtifact(name) {
      const repo = await json('GET', `/repos/${repository}`);
      const branch = repo.default_branch;
      const ours = (run) =>
        run?.head_branch === branch && run.head_repository_id === repo.id && run.repository_id === repo.id;
      for (let page = 1; page <= 10; page++) {
        const list = await needing('actions: read', 'list the artifacts', () =>
          json(
            'GET',
            `/repos/${repository}/actions/artifacts?name=${encodeURIComponent(name)}&per_page=100&page=${page}`,
          ),
        );
        const found = (list.artifacts ?? []).find(
          (a) => a.name === name && !a.expired && ours(a.workflow_run),
        );
        if (found) return { ...found, branch };
        if ((list.artifacts ?? []).length < 100) break;
      }
      return null;
    },

    /** The artifact's report.json, as text (the archive is fetched whole: a few hundred KiB). */
    async downloadReport(artifact) {
      const res = await needing('actions: read', 'download the artifact', () =>
        call('GET', artifact.archive_download_url),
      );
      const entry = readZipEntry(Buffer.from(await res.arrayBuffer()), 'report.json');
      if (entry === null) throw new Error(`artifact ${artifact.name} (#${artifact.id}) holds no report.json`);
      return entry.toString('utf8');
    },

    /**
     * Writes `markdown` as the pull request's comparison comment: updates the one it wrote before (the
     * marker opens it), or adds it. Anyone can post a comment that opens with the marker: the workflow's
     * token cannot edit theirs (403), so the bot's own are tried first and a refused one is passed over.
     */
    async upsertComment(issueNumber, markdown, key = '') {
      const marker = commentMarker(key);
      let text = markdown;
      if (text.length > MAX_COMMENT) {
        // Cut where a line (a table row) ends; a <details> left open would fold the note below into it.
        const cut = text.slice(0, text.lastIndexOf('\n', MAX_COMMENT - 200));
        const open = (cut.match(/<details>/g) ?? []).length - (cut.match(/<\/details>/g) ?? []).length;
        const close = '\n\n</details>'.repeat(Math.max(0, open));
        text = `${cut}${close}\n\n… cut to fit a comment: the job summary and the artifact have it whole.\n`;
      }
      const body = `${marker}\n${text}`;
      const marked = [];
      for (let page = 1; page <= 30; page++) {
        const comments = await json(
          'GET',
          `/repos/${repository}/issues/${issueNumber}/comments?per_page=100&page=${page}`,
        );
        marked.push(...comments.filter((c) => typeof c.body === 'string' && c.body.startsWith(marker)));
        if (comments.length < 100) break;
      }
      marked.sort((a, b) => Number(b.user?.type === 'Bot') - Number(a.user?.type === 'Bot'));
      for (const mine of marked) {
        try {
          await json('PATCH', `/repos/${repository}/issues/comments/${mine.id}`, { body });
          return { action: 'updated', id: mine.id };
        } catch (err) {
          if (!(err instanceof GitHubError) || err.status !== 403) throw err;
        }
      }
      const created = await json('POST', `/repos/${repository}/issues/${issueNumber}/comments`, { body });
      return { action: 'created', id: created.id };
    },
  };
}
