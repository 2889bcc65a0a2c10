"""Read queries, as keyword-only functions: the only place pages and the API get data from.

One module per job, imported by name (`from qita_board.queries import run_list`):

- `run_list`: the runs list, its search and filters, its figures and filter menus;
- `run_detail`: one run (row, criteria, early stop, verdict lane, steps, events, values by pointer);
- `live`: the cheap stamps open pages poll, and the run lookup every run route goes through;
- `run_export`: a run's records in v1 order;
- `comparison`: the compare and pair views;
- `experiments`: the experiments overview;
- `pointers`: JSON pointers into stored records (pure);
- `cache`: what is kept until the data changes.
"""
