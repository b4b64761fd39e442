import { EmptyState, PageHeader } from '../ui/kit';

export function SnippetPage(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Snippet" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
