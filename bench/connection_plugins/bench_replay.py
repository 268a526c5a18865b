# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bench-only connection plugin: answers each command with what a real node answered (never shipped).

Kept under bench/ (galaxy.yml's build_ignore leaves bench/ out of the collection tarball). bench/scale_bench.py
records, on the converged simulated fleet, every answer the ssh connection plugin gave the controller in a no-op
site.yml and a readiness.yml run (bench/scale_run.py --record), and points many inventory hosts at each recorded
node; this plugin gives each host its recorded node's answers. Everything on the controller runs as it does with
ssh: the action plugins, the AnsiballZ build of every module (its payload is built, written to a local temporary file
and handed to put_file, or passed as in_data when pipelining is on), templating, variables, forks, callbacks and the
handling of results. What does not run: the ssh client processes and the node itself.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = '''
    name: bench_replay
    short_description: answer with a recorded node's answers (bench only)
    description:
      - Answers every exec_command with the answer the ssh connection plugin gave for the same command on the
        recorded node (modules by their name and arguments, other commands by their text with temporary names
        normalized). A command that was not recorded fails the connection.
    author: gpufleet maintainers
    options:
      node:
        description: The recorded node whose answers this host gets.
        type: str
        required: true
        vars:
          - name: bench_replay_node
      recording:
        description: The folder of one playbook's recording (one folder per recorded node in it).
        type: str
        required: true
        env:
          - name: BENCH_REPLAY_DIR
      log:
        description: A file that gets one line per module answer (node, module, how it was matched).
        type: str
        env:
          - name: BENCH_REPLAY_LOG
      remote_user:
        description: The user the command runs as on the node (as the ssh plugin reads it).
        type: str
        vars:
          - name: ansible_user
          - name: ansible_ssh_user
        env:
          - name: ANSIBLE_REMOTE_USER
    extends_documentation_fragment:
      - connection_pipelining
'''

import hashlib
import json
import os
import re

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection import ConnectionBase

TMP_NAME = re.compile(r'ansible-tmp-[0-9.]+-[0-9]+-[0-9]+')
BECOME_MARK = re.compile(r'BECOME-SUCCESS-[a-z]+')
ANSIBALLZ_PATH = re.compile(r'AnsiballZ_([A-Za-z0-9_]+)\.py')
# What ansible-core runs on a module file besides running it: permissions (_fixup_perms2) and removal.
FILE_CHORES = re.compile(r'(^|[\s\'"(])(chmod|chown|chgrp|setfacl|rm|touch|stat) ')
WRAPPER_CALL = b'_ansiballz_main(\n'


def normalize_command(cmd):
    """A command with what changes from run to run (temporary folder names, the become marker) made constant."""
    return BECOME_MARK.sub('BECOME-SUCCESS-X', TMP_NAME.sub('ansible-tmp-X', cmd))


def params_key(params):
    """A digest of a module's arguments without ansible-core's internal ones (_ansible_*: tmp paths, versions)."""
    if params is None:
        return None
    args = json.loads(params).get('ANSIBLE_MODULE_ARGS', {})
    args = dict((k, v) for k, v in args.items() if not k.startswith('_ansible_'))
    return hashlib.sha1(json.dumps(args, sort_keys=True).encode('utf-8')).hexdigest()


def module_run(cmd, pending):
    """(module, params) when cmd runs an AnsiballZ file put earlier (pending: remote path -> (module, params))."""
    if not ANSIBALLZ_PATH.search(cmd) or FILE_CHORES.search(cmd):
        return None, None
    for path, info in pending.items():
        if path in cmd:
            return info
    return None, None


def module_of_payload(data):
    """(module fqn, params JSON text) of an AnsiballZ payload; (None, None) when data is not one.

    bench/scale_run.py's recorder reads payloads with it too. The payload ends with `_ansiballz_main(` and one `key=<literal>,` line
    per argument. Only the two lines needed are evaluated.
    """
    import ast
    if not data:
        return None, None
    at = data.rfind(WRAPPER_CALL)
    if at < 0:
        return None, None
    found = {}
    for line in data[at + len(WRAPPER_CALL):].splitlines():
        key, sep, value = line.partition(b'=')
        if sep and key in (b'module_fqn', b'params') and value.endswith(b','):
            try:
                found[key] = ast.literal_eval(value[:-1].decode('utf-8', 'surrogateescape'))
            except (ValueError, SyntaxError):
                pass
    if not isinstance(found.get(b'module_fqn'), str):
        return None, None
    params = found.get(b'params')
    return found[b'module_fqn'], params if isinstance(params, str) else None


class Connection(ConnectionBase):
    transport = 'bench_replay'
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super(Connection, self).__init__(*args, **kwargs)
        self._index = None
        self._pending = {}

    def _connect(self):
        self._connected = True
        return self

    def _node_dir(self):
        return os.path.join(self.get_option('recording'), self.get_option('node'))

    def _load_index(self):
        if self._index is None:
            path = os.path.join(self._node_dir(), 'index.json')
            try:
                with open(path) as handle:
                    self._index = json.load(handle)
            except (IOError, OSError, ValueError) as exc:
                raise AnsibleConnectionFailure('bench_replay: cannot read the recording {0}: {1}'.format(path, exc))
        return self._index

    def _answer(self, entry):
        with open(os.path.join(self._node_dir(), entry['stdout_file']), 'rb') as handle:
            out = handle.read()
        return entry['rc'], out, entry['stderr'].encode('utf-8', 'surrogateescape')

    def _log(self, module, how):
        path = self.get_option('log')
        if path:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, '{0}\t{1}\t{2}\n'.format(self.get_option('node'), module, how).encode('utf-8'))
            finally:
                os.close(fd)

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        index = self._load_index()
        module, params = module_of_payload(in_data)
        if module is None:
            module, params = module_run(cmd, self._pending)
        if module is not None:
            calls = index['modules'].get(module) or []
            key = params_key(params)
            exact = [c for c in calls if c['params_key'] == key]
            if exact:
                self._log(module, 'same arguments')
                return self._answer(exact[0])
            if len(calls) == 1:
                # One recorded call of this module on this node: the arguments differ only where the replayed host
                # differs (none here: each host copies its recorded node's variables), or in a time value.
                self._log(module, 'only call, other arguments')
                return self._answer(calls[0])
            raise AnsibleConnectionFailure('bench_replay: {0} was recorded {1} times on {2}, none with these '
                                           'arguments'.format(module, len(calls), self.get_option('node')))
        norm = normalize_command(cmd)
        entry = index['commands'].get(norm)
        if entry is None:
            raise AnsibleConnectionFailure('bench_replay: command not in the recording of {0}: {1}'.format(
                self.get_option('node'), norm))
        rc, out, err = self._answer(entry)
        names = TMP_NAME.findall(cmd)
        if names:
            # The temporary folder's name in the answer (mkdir echoes it back) is this run's, as a node would say.
            out = TMP_NAME.sub(names[0], out.decode('utf-8', 'surrogateescape')).encode('utf-8', 'surrogateescape')
        return rc, out, err

    def put_file(self, in_path, out_path):
        super(Connection, self).put_file(in_path, out_path)
        with open(in_path, 'rb') as handle:
            module, params = module_of_payload(handle.read())
        if module:
            self._pending[out_path] = (module, params)

    def fetch_file(self, in_path, out_path):
        super(Connection, self).fetch_file(in_path, out_path)
        raise AnsibleConnectionFailure('bench_replay: fetch_file is not recorded ({0})'.format(in_path))

    def close(self):
        self._connected = False
