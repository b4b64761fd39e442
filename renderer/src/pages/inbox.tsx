import { EmptyState, PageHeader } from '../ui/kit';

export function Inbox(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Callback inbox" />
      <EmptyState title="Not built yet">This page arrives with the GUI issue.</EmptyState>
    </>
  );
}
