# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests for roles/rdma/files/nodeprep-pci-acs (the ACS boot script): it finds the ports at boot with the plan's own
rules (on the real HGX H100 capture, tests/fixtures/lspci, and the same capture renumbered), refuses in a virtual
machine, and runs standalone from the copy of the rules the plan installs (python3 -I -S, no Ansible)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.machinery
import importlib.util
import io
import os
import stat
import subprocess
import sys

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _rdma_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _rdma_path
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_rdma as P
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rdma as R
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_rdma as T
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test__rdma as TR

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, '..', '..', '..', '..', 'roles', 'rdma', 'files', 'nodeprep-pci-acs')


def _load():
    loader = importlib.machinery.SourceFileLoader('nodeprep_pci_acs', SCRIPT)
    spec = importlib.util.spec_from_loader('nodeprep_pci_acs', loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


script = _load()


def capture(shift=0):
    with open(TR.H100) as handle:
        text = handle.read()
    return TR.renumbered(text, shift) if shift else text


class Node(object):
    """The commands the script runs, answered as on a node (systemd-detect-virt(1): "none" and exit 1 on bare
    metal)."""

    def __init__(self, lspci, virt=(1, 'none\n'), setpci_rc=0):
        self.lspci, self.virt, self.setpci_rc, self.calls = lspci, virt, setpci_rc, []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[0] == 'systemd-detect-virt':
            return self.virt[0], self.virt[1], ''
        if argv[0] == 'lspci':
            return 0, self.lspci, ''
        if argv[0] == 'setpci':
            return self.setpci_rc, '', '' if self.setpci_rc == 0 else 'setpci: Capability ACS not found\n'
        raise AssertionError(argv)


def run(node, *args):
    out, err = io.StringIO(), io.StringIO()
    rc = script.main(list(args), run=node, out=out, err=err, read=lambda path: None, rules=(R, _rdma_path))
    return rc, out.getvalue(), err.getvalue()


def setpcis(node):
    return [call for call in node.calls if call[0] == 'setpci']


def test_clears_the_ports_the_plan_finds():
    node = Node(capture())
    rc, out, _err = run(node)
    assert rc == 0
    assert setpcis(node) == [['setpci', '-s', port, 'ECAP_ACS+0x6.w=0000'] for port in TR.H100_ACS_PORTS]
    # the plan, from the gathered devices of the same node, names the same ports
    gathered = _rdma_state.relevant_devices(_rdma_path.parse_lspci_vvv(capture()))
    assert R.acs_unit_ports(gathered) == [call[2] for call in setpcis(node)]
    assert out == 'nodeprep-pci-acs: ACS control cleared on 18 of 18 ports: {0}\n'.format(', '.join(TR.H100_ACS_PORTS))


def test_follows_a_renumbering():
    # a BIOS or adapter change moved the buses: the unit file is the same, the ports follow
    node = Node(capture(shift=3))
    assert run(node)[0] == 0
    assert [call[2] for call in setpcis(node)][:3] == ['0000:1a:01.0', '0000:1a:02.0', '0000:1a:03.0']
    assert '0000:17:01.0' not in [call[2] for call in setpcis(node)]


def test_refuses_in_a_virtual_machine():
    node = Node(capture(), virt=(0, 'kvm\n'))
    rc, _out, err = run(node)
    assert rc == script.EXIT_VM and setpcis(node) == [] and ['lspci', '-D', '-vvv'] not in node.calls
    assert 'is a virtual machine (systemd-detect-virt --vm: kvm): ACS must stay on' in err and 'nothing changed' in err


def test_setpci_failure_is_reported():
    node = Node(capture(), setpci_rc=1)
    rc, _out, err = run(node)
    assert rc == script.EXIT_SETPCI and 'setpci -s 0000:17:01.0 ECAP_ACS+0x6.w=0000 failed (rc=1)' in err


def test_dry_run_changes_nothing():
    node = Node(capture())
    rc, out, _err = run(node, '--dry-run')
    assert rc == 0 and setpcis(node) == []
    assert out.splitlines()[0] == 'nodeprep-pci-acs: would run setpci -s 0000:17:01.0 ECAP_ACS+0x6.w=0000'


def test_runs_from_the_copy_the_plan_installs(tmp_path):
    """The files the plan writes, laid out as on the node, run with the unit's own command line (python3 -I -S: no
    site-packages, so no Ansible) against lspci and systemd-detect-virt stand-ins on PATH."""
    plan = _plan.plan_with(P, T.facts({}), T.settings(nodeprep_rdma_acs_unit=True), context=T.context())
    lib = str(tmp_path / 'lib')
    for entry in plan['files']:
        if entry['path'].startswith(P.ACS_LIB):
            target = lib + entry['path'][len(P.ACS_LIB):]
            if entry['state'] == 'directory':
                os.makedirs(target)
            else:
                with open(target, 'w') as handle:
                    handle.write(entry['content'])
    script_text = [e for e in plan['files'] if e['path'] == P.ACS_SCRIPT][0]['content']
    assert script_text == _plans.role_files('rdma')['acs_script']
    (tmp_path / 'nodeprep-pci-acs').write_text(script_text)
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (tmp_path / 'lspci.txt').write_text(capture())
    for name, body in (('lspci', 'cat {0}'.format(tmp_path / 'lspci.txt')), ('systemd-detect-virt', 'echo none; exit 1')):
        tool = bin_dir / name
        tool.write_text('#!/bin/sh\n{0}\n'.format(body))
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    env = {'PATH': '{0}:/usr/bin:/bin'.format(bin_dir)}
    proc = subprocess.run([sys.executable, '-I', '-S', str(tmp_path / 'nodeprep-pci-acs'), '--dry-run', '--lib', lib],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, universal_newlines=True, check=False)
    assert (proc.returncode, proc.stderr) == (0, '')
    assert proc.stdout.splitlines() == ['nodeprep-pci-acs: would run setpci -s {0} ECAP_ACS+0x6.w=0000'.format(port)
                                        for port in TR.H100_ACS_PORTS]
