/**
 * The migration guide as an HTML page, rendered with markdown-it. Raw HTML in the markdown is not
 * passed through (`html: false`: a tag shows as text), and markdown-it's link check refuses
 * `javascript:`, `vbscript:`, `file:` and non-image `data:` URLs, so even a careless edit of the
 * guide cannot put script or markup of its own into the page; the page's CSP allows no script anyway.
 */
import MarkdownIt from 'markdown-it';
import { escapeHtml, htmlPage } from './page';

const md = new MarkdownIt({ html: false, linkify: false, typographer: false });

/** Headings get ids (GitHub's slugs: lower case, punctuation dropped, spaces to dashes, repeats numbered). */
export function slugify(text: string): string {
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

interface Heading {
  level: number;
  id: string;
  text: string;
}

md.core.ruler.push('heading_ids', (state) => {
  const seen = new Map<string, number>();
  const headings: Heading[] = [];
  state.tokens.forEach((token, i) => {
    if (token.type !== 'heading_open') return;
    const inline = state.tokens[i + 1];
    const text = (inline?.children ?? [])
      .filter((c) => c.type === 'text' || c.type === 'code_inline')
      .map((c) => c.content)
      .join('');
    const base = slugify(text) || 'section';
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    const id = n === 0 ? base : `${base}-${n}`;
    token.attrSet('id', id);
    headings.push({ level: Number(token.tag.slice(1)), id, text });
  });
  (state.env as { headings?: Heading[] }).headings = headings;
});

// A visible "#" link on each heading: the address of a section to share.
md.renderer.rules.heading_open = (tokens, idx, options, _env, self) => {
  const id = tokens[idx]!.attrGet('id') ?? '';
  return `${self.renderToken(tokens, idx, options)}<a class="anchor" href="#${escapeHtml(id)}" aria-label="Link to this section">#</a>`;
};
// Wide tables scroll on their own instead of widening the page.
md.renderer.rules.table_open = () => '<div class="table-wrap"><table>\n';
md.renderer.rules.table_close = () => '</table></div>\n';

/** The guide's markdown (already in the deployment's words) as a whole HTML page with a table of contents. */
export function guideHtml(markdown: string): string {
  const env: { headings?: Heading[] } = {};
  const article = md.render(markdown, env);
  const headings = env.headings ?? [];
  const title = headings.find((h) => h.level === 1)?.text ?? 'Migration guide';
  const sections = headings.filter((h) => h.level === 2);
  const toc = sections.length
    ? `<nav class="toc" aria-label="On this page"><strong>On this page</strong><ol>${sections
        .map((h) => `<li><a href="#${escapeHtml(h.id)}">${escapeHtml(h.text)}</a></li>`)
        .join('')}</ol></nav>`
    : '';
  // The table of contents goes right after the title.
  const h1End = article.indexOf('</h1>');
  const body = h1End < 0 ? toc + article : article.slice(0, h1End + 5) + toc + article.slice(h1End + 5);
  return htmlPage({ title, body: `<article>${body}</article>` });
}
