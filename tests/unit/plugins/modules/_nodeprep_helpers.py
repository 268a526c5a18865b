# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared helpers for the host facts module tests (limits, shm, kernel)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def run_module(main, args, capsys, monkeypatch, commands=None):
    """Run main() with args; commands maps tuple(argv) -> (rc, out, err). Returns (result, argvs run)."""
    seen = []
    commands = commands or {}

    def fake_run(self, argv, **kwargs):
        seen.append(list(argv))
        assert kwargs.get('environ_update') == {'LC_ALL': 'C', 'LANGUAGE': 'C'}
        if tuple(argv) not in commands:
            raise AssertionError('unexpected command {0}'.format(argv))
        return commands[tuple(argv)]

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', fake_run)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            main()
    out = capsys.readouterr().out
    return json.loads(out), seen


def ansible_adhoc(module, args):
    """Run `ansible localhost -m gpufleet.nodeprep.<module>` with the collection path pytest set up."""
    base = [p for p in os.listdir('/tmp') if p.startswith('nodeprep-pytest-')]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=':'.join(os.path.join('/tmp', b) for b in base),
               ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    argv = [os.path.join(ROOT, '.venv', 'bin', 'ansible'), 'localhost', '-m', 'gpufleet.nodeprep.' + module]
    if args:
        argv += ['-a', json.dumps(args)]
    proc = subprocess.run(argv, env=env, timeout=120, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    text = proc.stdout.decode()
    assert proc.returncode == 0, text + proc.stderr.decode()
    return json.loads(text.split('=>', 1)[1])
