import { EmptyState, PageHeader } from '../ui/kit';

export function Store(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Store" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
