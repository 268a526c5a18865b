# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one test harness of the unit tests: paths, module runs, fake tools.

Import it by its collection name, so that it works under plain pytest (tests/unit/conftest.py puts this checkout's
collection on sys.path) and under ``ansible-test units`` (which lays the collection out itself)::

    from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, run_main

Never ``from conftest import``: ansible-test cannot import conftest that way.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import contextlib
import json
import os
import stat
import subprocess
import sys
import sysconfig

import pytest

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

try:  # ansible-core 2.19 and later
    from ansible.module_utils.testing import patch_module_args as _core_patch_module_args
except ImportError:  # ansible-core 2.16 to 2.18
    _core_patch_module_args = None

# The checkout (or the copy ansible-test made) this file belongs to, with every link resolved.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures')
# The environment the tests run in: tools next to the running interpreter, never a fixed .venv path.
BIN = os.path.dirname(os.path.abspath(sys.executable))
C_LOCALE = {'LC_ALL': 'C', 'LANGUAGE': 'C'}


def collection_parent(root=ROOT, path=None):
    """The sys.path entry whose ansible_collections/gpufleet/nodeprep is this checkout (a collections path).

    Only this checkout counts: a folder that holds another checkout's (or a stale) link is never returned.
    """
    for entry in (sys.path if path is None else path):
        candidate = os.path.join(entry or os.curdir, 'ansible_collections', 'gpufleet', 'nodeprep')
        if os.path.isdir(candidate) and os.path.realpath(candidate) == root:
            return os.path.abspath(entry or os.curdir)
    raise AssertionError('no entry of sys.path holds ansible_collections/gpufleet/nodeprep for {0}; '
                         'run the tests with pytest from the checkout or with ansible-test units'.format(root))


def ansible_env(**extra):
    """An environment for ansible/ansible-playbook subprocesses: this checkout first, then the bundled collections."""
    # PYTHONPATH: under `ansible-test units` it points at ansible-test's restricted copy of ansible (module_utils
    # only), which the ansible command line tools cannot start from.
    env = dict((k, v) for k, v in os.environ.items() if k not in ('ANSIBLE_CONFIG', 'PYTHONPATH'))
    env.update({
        'ANSIBLE_COLLECTIONS_PATH': os.pathsep.join([collection_parent(), sysconfig.get_paths()['purelib']]),
        'ANSIBLE_COLLECTIONS_SCAN_SYS_PATH': 'false',
        'ANSIBLE_NOCOLOR': '1', 'ANSIBLE_FORCE_COLOR': '0', 'ANSIBLE_LOCALHOST_WARNING': 'false',
        'ANSIBLE_INVENTORY_UNPARSED_WARNING': 'false', 'ANSIBLE_RETRY_FILES_ENABLED': 'false',
    })
    env.update(extra)
    return env


def ansible_bin(name):
    """Path of an ansible command line tool: of the running environment, or of NODEPREP_TEST_ANSIBLE_BIN's folder.

    ``make py36-units`` runs the tests on Python 3.6, where no ansible command line starts: it names ansible-core
    2.16's folder there (the last controller that manages Python 3.6 nodes).
    """
    return os.path.join(os.environ.get('NODEPREP_TEST_ANSIBLE_BIN') or BIN, name)


@contextlib.contextmanager
def patch_module_args(args):
    """Set the module args for AnsibleModule: ansible-core's own helper from 2.19, the old way before."""
    if _core_patch_module_args is not None:
        with _core_patch_module_args(args):
            yield
        return
    args = dict(args or {})
    args.setdefault('_ansible_remote_tmp', '/tmp')  # nosec B108 - never written by these tests
    args.setdefault('_ansible_keep_remote_files', False)
    saved = dict((name, getattr(basic, name)) for name in ('_ANSIBLE_ARGS', '_ANSIBLE_PROFILE') if hasattr(basic, name))
    basic._ANSIBLE_ARGS = to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args}))
    if '_ANSIBLE_PROFILE' in saved:  # only when this fallback runs on 2.19 or later (tests of the fallback)
        basic._ANSIBLE_PROFILE = 'legacy'
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(basic, name, value)


def real_module(args=None):
    """A real AnsibleModule (no options) whose run_command and get_bin_path run for real."""
    with patch_module_args(args or {}):
        return basic.AnsibleModule(argument_spec={})


def run_main_rc(main, args, capsys):
    """Run a module's main() with args; return (exit code, result dict)."""
    with patch_module_args(args):
        with pytest.raises(SystemExit) as excinfo:
            main()
    return excinfo.value.code, json.loads(capsys.readouterr().out)


def run_main(main, args, capsys):
    """Run a module's main() with args; return its result dict."""
    return run_main_rc(main, args, capsys)[1]


def run_module(main, args, capsys, monkeypatch, commands=None):
    """Run main() with args; commands maps tuple(argv) -> (rc, out, err). Returns (result, argvs run).

    Every command must run with LC_ALL=C and be one of ``commands``.
    """
    seen = []
    commands = commands or {}

    def fake_run(self, argv, **kwargs):
        seen.append(list(argv))
        assert kwargs.get('environ_update') == C_LOCALE
        if tuple(argv) not in commands:
            raise AssertionError('unexpected command {0}'.format(argv))
        return commands[tuple(argv)]

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', fake_run)
    result = run_main(main, args, capsys)
    return result, seen


class ScriptedCommands(object):
    """run_command in a fixed order: calls is [(argv, rc, out, err)]; each must come, in order, with LC_ALL=C."""

    def __init__(self, calls):
        self.calls = list(calls)

    def __call__(self, module, argv, environ_update=None, **kwargs):
        assert environ_update == C_LOCALE
        assert self.calls, 'unexpected command {0}'.format(argv)
        expected, rc, out, err = self.calls.pop(0)
        assert argv == expected
        return rc, out, err

    def install(self, monkeypatch, tools):
        """Patch AnsibleModule.run_command and get_bin_path (tools: name -> path or None)."""
        monkeypatch.setattr(basic.AnsibleModule, 'run_command',
                            lambda module, argv, environ_update=None, **kw: self(module, argv, environ_update, **kw))
        monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                            lambda module, name, required=False, opt_dirs=None: tools.get(name))
        return self


class FakeModule(object):
    """A module stand-in for the pure readers: get_bin_path from ``tools`` (name -> path or None); run_command answers
    ``calls`` ([(rc, out, err)]) in order, after checking the runner's locale and argv handling; ``seen``: the argvs."""

    def __init__(self, tools, calls):
        self.tools = tools
        self.calls = list(calls)
        self.seen = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.tools.get(name)

    def run_command(self, argv, environ_update=None, **kwargs):
        assert environ_update == C_LOCALE
        assert kwargs['expand_user_and_vars'] is False
        self.seen.append(list(argv))
        assert self.calls, 'unexpected command {0}'.format(argv)
        return self.calls.pop(0)


def process_gone(pid):
    """The process has exited (no /proc entry, or a zombie waiting for its parent)."""
    try:
        with open('/proc/{0}/stat'.format(pid)) as handle:
            return handle.read().split(') ', 1)[1].startswith('Z')
    except (IOError, OSError):
        return True


def read_fixture(*parts):
    """Text of a file under tests/fixtures."""
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


def ethtool_fixture(name):
    """Text of a captured ethtool output under tests/fixtures/ethtool."""
    return read_fixture('ethtool', name)


def fake_script(folder, name, body):
    """An executable shell script standing in for a tool (nvidia-smi, ethtool); runs for real."""
    path = os.path.join(str(folder), name)
    with open(path, 'w') as handle:
        handle.write('#!/bin/sh\n' + body + '\n')
    os.chmod(path, stat.S_IRWXU)
    return path


def fake_smi(folder, body):
    """A real executable nvidia-smi in folder (runs through _runner.run for real)."""
    return fake_script(folder, 'nvidia-smi', body)


def fake_tool(folder, name, reads):
    """A script that logs each argv to <name>.log and prints a fixture for a read ([(first arg, fixture path)]).

    Returns (path, log); read the log with logged().
    """
    log = os.path.join(str(folder), name + '.log')
    lines = ['printf "%s\\n" "$*" >> "{0}"'.format(log)]
    for flag, fixture in reads:
        lines.append('if [ "$1" = "{0}" ]; then cat "{1}"; exit 0; fi'.format(flag, fixture))
    lines.append('exit 0')
    return fake_script(folder, name, '\n'.join(lines)), log


def logged(log):
    """The argvs a fake_tool() script was called with, each split into words."""
    if not os.path.exists(log):
        return []
    with open(log) as handle:
        return [line.split() for line in handle.read().splitlines()]


def ansible_adhoc(module, args):
    """Run ``ansible localhost -m gpufleet.nodeprep.<module>`` against this checkout; return its result."""
    argv = [ansible_bin('ansible'), 'localhost', '-m', 'gpufleet.nodeprep.' + module]
    if os.environ.get('NODEPREP_TEST_ANSIBLE_BIN'):
        # The module runs on the Python of the tests (3.6 under make py36-units), as on a node, not the controller's.
        argv += ['-e', 'ansible_python_interpreter=' + sys.executable]
    if args:
        argv += ['-a', json.dumps(args)]
    proc = subprocess.run(argv, env=ansible_env(), timeout=120, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=False)
    text = proc.stdout.decode()
    assert proc.returncode == 0, text + proc.stderr.decode()
    return json.loads(text.split('=>', 1)[1])
