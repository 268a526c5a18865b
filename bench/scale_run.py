# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run `ansible-playbook` inside this process and measure it (started by bench/scale_bench.py; not shipped).

    scale_run.py --stats OUT.json [--record DIR] [--profile OUT.prof] -- ansible-playbook ARGS...

The playbook runs in this very process (ansible-core's own `ansible.cli.playbook.main`), so that when it ends this
process can read what the controller's main process spent (`RUSAGE_SELF`: CPU, peak resident memory) and what its
workers and their children spent (`RUSAGE_CHILDREN`: ansible-core forks one worker per host and task and waits for
each). `--stats` writes those figures as JSON.

`--record DIR` records, on the real fleet, what the ssh connection plugin returns to the controller: each
`exec_command` (the command, its exit status, stdout and stderr) and each `put_file` (the module the file carries),
one JSON line per call in DIR/<address>.jsonl. bench/scale_bench.py turns that into the recording which
bench/connection_plugins/bench_replay.py answers from. The workers are forked (ansible-core's multiprocessing context
is 'fork'), so patching the ssh plugin's class here reaches them.

`--profile OUT.prof` runs the playbook under cProfile (main process only: a forked worker stops the profiler) and
dumps the statistics; a profiled run is slower and is never the measured one.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _replay_plugin():
    """bench/connection_plugins/bench_replay.py: the one reading of an AnsiballZ payload, shared with the replay."""
    import importlib.util
    spec = importlib.util.spec_from_file_location('bench_replay', os.path.join(HERE, 'connection_plugins',
                                                                               'bench_replay.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _text(data):
    if data is None:
        return None
    if isinstance(data, bytes):
        return data.decode('utf-8', 'surrogateescape')
    return data


def install_recorder(folder):
    """Patch the ssh connection plugin so that every answer it gives the controller is also written to folder."""
    from ansible.plugins.connection import ssh

    replay = _replay_plugin()
    module_of_payload = replay.module_of_payload
    os.makedirs(folder, exist_ok=True)
    orig_exec = ssh.Connection.exec_command
    orig_put = ssh.Connection.put_file
    pending = {}  # remote path -> (module, params) of the AnsiballZ file put there (same worker as its exec)

    def write(conn, entry):
        host = str(conn.get_option('host'))
        entry['t'] = time.time()
        line = json.dumps(entry, sort_keys=True) + '\n'
        # One write per line, O_APPEND: lines of concurrent workers never interleave.
        fd = os.open(os.path.join(folder, host + '.jsonl'), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode('utf-8', 'surrogateescape'))
        finally:
            os.close(fd)

    def exec_command(self, cmd, in_data=None, sudoable=True):
        rc, out, err = orig_exec(self, cmd, in_data=in_data, sudoable=sudoable)
        module, params = module_of_payload(in_data)
        if module is None:
            module, params = replay.module_run(cmd, pending)
        write(self, {'op': 'exec', 'cmd': _text(cmd), 'module': module, 'params': params,
                     'in_data': None if in_data is None or module else _text(in_data),
                     'rc': rc, 'stdout': _text(out), 'stderr': _text(err)})
        return rc, out, err

    def put_file(self, in_path, out_path):
        orig_put(self, in_path, out_path)
        with open(in_path, 'rb') as handle:
            module, params = module_of_payload(handle.read())
        if module:
            pending[out_path] = (module, params)
        write(self, {'op': 'put', 'dest': _text(out_path), 'module': module, 'params': params})

    ssh.Connection.exec_command = exec_command
    ssh.Connection.put_file = put_file


def run_playbook(argv):
    from ansible.cli.playbook import main as playbook_main
    try:
        rc = playbook_main(['ansible-playbook'] + argv)
    except SystemExit as exc:
        rc = exc.code
    return rc if isinstance(rc, int) else (0 if rc is None else 1)


def parse_args(argv):
    opts = {'stats': None, 'record': None, 'profile': None}
    if '--' not in argv:
        raise SystemExit('usage: scale_run.py --stats OUT.json [--record DIR] [--profile OUT.prof] -- ARGS...')
    cut = argv.index('--')
    own, rest = argv[:cut], argv[cut + 1:]
    while own:
        key = own.pop(0)
        if key.startswith('--') and key[2:] in opts and own:
            opts[key[2:]] = own.pop(0)
        else:
            raise SystemExit('scale_run.py: unknown or incomplete option {0!r}'.format(key))
    return opts, rest


def main(argv):
    opts, rest = parse_args(argv)
    if opts['record']:
        install_recorder(opts['record'])
    start = time.monotonic()
    start_cpu = resource.getrusage(resource.RUSAGE_SELF)
    if opts['profile']:
        import cProfile
        prof = cProfile.Profile()
        os.register_at_fork(after_in_child=prof.disable)
        prof.enable()
        try:
            rc = run_playbook(rest)
        finally:
            prof.disable()
            prof.dump_stats(opts['profile'])
    else:
        rc = run_playbook(rest)
    wall = time.monotonic() - start
    self_ru = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    stats = {
        'rc': rc,
        'wall_s': wall,
        # Python start-up and the imports before the playbook began: in the main process's figures, said apart here.
        'startup_cpu_s': start_cpu.ru_utime + start_cpu.ru_stime,
        'main_user_s': self_ru.ru_utime, 'main_sys_s': self_ru.ru_stime,
        'main_maxrss_kb': self_ru.ru_maxrss,
        'children_user_s': children.ru_utime, 'children_sys_s': children.ru_stime,
        'children_maxrss_kb': children.ru_maxrss,
        'profiled': bool(opts['profile']),
    }
    if opts['stats']:
        with open(opts['stats'], 'w') as handle:
            json.dump(stats, handle, indent=1, sort_keys=True)
    return rc


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
