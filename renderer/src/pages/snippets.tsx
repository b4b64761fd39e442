import { EmptyState, PageHeader } from '../ui/kit';

export function Snippets(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Snippets" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
