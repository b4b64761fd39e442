import { EmptyState, PageHeader } from '../ui/kit';

export function StreamInspector(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Live streams" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
