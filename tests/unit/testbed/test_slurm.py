# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Slurm fleet's pure parts: slurm.conf from slurmd -C, Slurm's Key=Value output, the fleet plan and inventory
(tests/testbed/slurmconf.py, tests/testbed/testbed.py up --slurm). The daemons themselves are checked by
make slurm-fleet (tests/testbed/slurm_fleet.py) on a real fleet."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

sys.path.insert(0, os.path.join(ROOT, 'tests', 'testbed'))

import slurmconf  # noqa: E402
import testbed  # noqa: E402

# slurmd -C in a node of this fleet (2-core host), Slurm 22.05.8
SLURMD_C = ('NodeName=el9-b200-01 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 '
            'RealMemory=24105\nUpTime=0-00:00:28\n')
# scontrol show node -o of a drained node, Slurm 22.05.8 (shortened)
NODE_LINE = ('NodeName=ubuntu2404-h200-01 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUEfctv=2 CPUTot=2 '
             'NodeAddr=10.233.0.6 RealMemory=24105 State=IDLE+DRAIN ThreadsPerCore=1 BootTime=2026-12-01T20:26:05 '
             'CfgTRES=cpu=2,mem=24105M,billing=2 AllocTRES= Reason=testbed: drain check [root@2026-12-01T20:30:00]')


def test_parse_slurmd_c():
    assert slurmconf.parse_slurmd_c(SLURMD_C) == {
        'CPUs': 2, 'Boards': 1, 'SocketsPerBoard': 1, 'CoresPerSocket': 2, 'ThreadsPerCore': 1, 'RealMemory': 24105}


@pytest.mark.parametrize('text', ['', 'UpTime=0-00:00:28\n', 'NodeName=x CPUs=2 Boards=1\n'])
def test_parse_slurmd_c_refuses_incomplete_output(text):
    with pytest.raises(ValueError):
        slurmconf.parse_slurmd_c(text)


def test_parse_nodes_keeps_reasons_with_spaces_and_empty_values():
    node = slurmconf.parse_nodes(NODE_LINE + '\n\n')['ubuntu2404-h200-01']
    assert node['State'] == 'IDLE+DRAIN'
    assert node['Reason'] == 'testbed: drain check [root@2026-12-01T20:30:00]'
    assert node['AllocTRES'] == ''
    assert node['CfgTRES'] == 'cpu=2,mem=24105M,billing=2'
    assert node['CPUTot'] == '2'


def test_slurm_conf_lists_the_nodes_with_their_hardware():
    hw = slurmconf.parse_slurmd_c(SLURMD_C)
    text = slurmconf.slurm_conf('npsl', {'name': 'slurm-head', 'addr': '10.233.255.254'},
                                [{'name': 'ubuntu2404-h200-01', 'addr': '10.233.0.6', 'hardware': hw},
                                 {'name': 'el9-b200-01', 'addr': '10.233.0.2', 'hardware': hw}])
    lines = text.splitlines()
    assert 'SlurmctldHost=slurm-head(10.233.255.254)' in lines
    assert 'ReturnToService=1' in lines
    for setting in ('ProctrackType=proctrack/linuxproc', 'TaskPlugin=task/none', 'JobAcctGatherType=jobacct_gather/none',
                    'SlurmdParameters=config_overrides', 'ResumeTimeout=600'):
        assert setting in lines
    nodes = [l for l in lines if l.startswith('NodeName=')]
    assert nodes == [
        'NodeName=el9-b200-01 NodeAddr=10.233.0.2 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 '
        'RealMemory=24105 State=UNKNOWN',
        'NodeName=ubuntu2404-h200-01 NodeAddr=10.233.0.6 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 '
        'ThreadsPerCore=1 RealMemory=24105 State=UNKNOWN']
    assert 'Gres' not in text       # 22.05 drops GPUs without File=, and the double has no /dev/nvidia*
    assert lines[-1] == 'PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP'


@pytest.mark.parametrize('rts, nodes', [(3, [{'name': 'n', 'addr': 'a', 'hardware': {}}]), (1, [])])
def test_slurm_conf_refuses(rts, nodes):
    with pytest.raises(ValueError):
        slurmconf.slurm_conf('c', {'name': 'h', 'addr': 'a'}, nodes, return_to_service=rts)


def test_cgroup_conf_autodetects():
    assert 'CgroupPlugin=autodetect' in slurmconf.cgroup_conf().splitlines()


def test_default_fleet_plan_is_unchanged_by_the_slurm_option():
    plain = testbed.plan_fleet(4)
    assert [n['name'] for n in plain] == ['el9-b200-01', 'el8-h100-01', 'ubuntu2404-h200-01', 'el10-b200-01']
    assert not any('slurm' in n for n in plain)
    assert plain == testbed.plan_fleet(4, kinds=None, slurm=False)


def test_slurm_fleet_plan(monkeypatch):
    monkeypatch.setattr(testbed, 'PREFIX', 'npsl')
    monkeypatch.setattr(testbed, 'SUBNET', (10, 233))
    fleet = testbed.plan_fleet(3, kinds='el9-b200,ubuntu2404-h200', slurm=True)
    names = [n['name'] for n in fleet]
    assert names == ['el9-b200-01', 'ubuntu2404-h200-01', 'el9-b200-02', 'slurm-head']
    head = fleet[-1]
    assert head['slurm'] == 'head' and head['gpu'] is None and head['profile_path'] is None
    assert head['node_ip'] == '10.233.255.254' and head['veth_host'] == 'npsl16383h'
    assert head['netns'] == 'npsl-slurm-head'
    assert [n['slurm'] for n in fleet[:-1]] == ['node'] * 3
    # the GPU nodes keep the addresses of the plain fleet
    assert [n['node_ip'] for n in fleet[:-1]] == ['10.233.0.2', '10.233.0.6', '10.233.0.10']


def test_unknown_kind_is_refused():
    with pytest.raises(testbed.TestbedError, match='el9-b200'):
        testbed.plan_fleet(1, kinds='el9-a100')


def test_inventory_puts_the_head_in_its_own_group_only(tmp_path, monkeypatch):
    monkeypatch.setattr(testbed, 'STATE_DIR', str(tmp_path))
    fleet = testbed.plan_fleet(2, kinds='el9-b200,ubuntu2404-h200', slurm=True)
    testbed.write_inventory(fleet, '/k')
    inv = yaml.safe_load((tmp_path / 'inventory.yml').read_text())['all']
    groups = inv['children']
    assert list(groups['slurm_head']['hosts']) == ['slurm-head']
    assert sorted(groups['slurm_nodes']['hosts']) == ['el9-b200-01', 'ubuntu2404-h200-01']

    def members(group):
        out = set((group.get('hosts') or {}).keys())
        for child in (group.get('children') or {}).values():
            out |= members(child)
        return out

    for name, group in groups.items():
        if name != 'slurm_head':
            assert 'slurm-head' not in members(group), name
    assert inv['vars']['nodeprep_boot_time_command'] == "awk '/^btime/ {print $2}' /proc/stat"


def test_plain_inventory_has_no_slurm_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(testbed, 'STATE_DIR', str(tmp_path))
    testbed.write_inventory(testbed.plan_fleet(4), '/k')
    inv = yaml.safe_load((tmp_path / 'inventory.yml').read_text())['all']
    assert not [g for g in inv['children'] if g.startswith('slurm')]
    assert inv['vars']['nodeprep_boot_time_command'] == "awk '{print $22}' /proc/1/stat"


def test_slurm_version_default_and_refusal(monkeypatch):
    monkeypatch.delenv('TESTBED_SLURM_VERSION', raising=False)
    assert testbed.slurm_version() == '24.11'
    monkeypatch.setenv('TESTBED_SLURM_VERSION', '22.05')
    assert testbed.slurm_version() == '22.05'
    monkeypatch.setenv('TESTBED_SLURM_VERSION', '23.02')
    with pytest.raises(testbed.TestbedError, match=r"TESTBED_SLURM_VERSION='23.02' is not known; allowed: 22.05, 24.11"):
        testbed.slurm_version()


def fake_root(tmp_path):
    """The parts of Debian 13's Slurm root slurm_root_files() reads: the units as packaged, the package lists."""
    root = tmp_path / 'opt' / 'slurm-24.11'
    units = root / 'usr/lib/systemd/system'
    units.mkdir(parents=True)
    for unit in ('munge', 'slurmd', 'slurmctld'):
        (units / (unit + '.service')).write_text('[Service]\nExecStart=/usr/sbin/{0}\n'.format(unit))
    info = root / 'var/lib/dpkg/info'
    info.mkdir(parents=True)
    (info / 'slurm-client.list').write_text('/.\n/usr\n/usr/bin\n/usr/bin/scontrol\n/usr/bin/sinfo\n'
                                            '/usr/share/man/man1/sinfo.1.gz\n')
    (info / 'munge.list').write_text('/usr/bin\n/usr/bin/munge\n/usr/sbin/munged\n')
    return str(root)


def test_slurm_root_files_head_and_node(tmp_path):
    root = fake_root(tmp_path)
    head = testbed.slurm_root_files('24.11', 'head', root)
    node = testbed.slurm_root_files('24.11', 'node', root)
    # the daemon of the role only: the head has no slurmd, a GPU node no slurmctld
    assert 'usr/sbin/slurmctld' in head and 'usr/sbin/slurmd' not in head
    assert 'usr/sbin/slurmd' in node and 'usr/sbin/slurmctld' not in node
    for files in (head, node):
        wrapped = sorted(k for k in files if k.startswith('usr/bin/'))
        assert wrapped == ['usr/bin/munge', 'usr/bin/scontrol', 'usr/bin/sinfo']
        text, mode = files['usr/bin/scontrol']
        assert mode == 0o755 and 'exec /usr/sbin/chroot /opt/slurm-24.11 ' in text and '/usr/bin/scontrol "$@"' in text
        assert files['usr/lib/systemd/system/munge.service'][0] == '[Service]\nExecStart=/usr/sbin/munge\n'
        binds = files['usr/local/lib/testbed/slurm-root-binds'][0]
        assert 'R=/opt/slurm-24.11' in binds and 'etc/passwd' in binds and ' run ' in binds
    drop = node['etc/systemd/system/slurmd.service.d/testbed-slurm-root.conf'][0]
    assert 'RootDirectory=/opt/slurm-24.11' in drop and 'Environment=SYSTEMD_IGNORE_CHROOT=1' in drop
    drop = head['etc/systemd/system/slurmctld.service.d/testbed-slurm-root.conf'][0]
    assert 'RootDirectory=/opt/slurm-24.11' in drop and 'SYSTEMD_IGNORE_CHROOT' not in drop


@pytest.mark.parametrize('value, content', [(None, '150\n'), ('150', '150\n'), ('9', '9\n')])
def test_slow_boot_fault_value(value, content):
    class Args(object):
        gpu = None
    args = Args()
    args.value = value
    assert testbed.fault_content('slow-boot', args) == content


@pytest.mark.parametrize('value', ['0', '-5', 'abc', '3601', '1.5'])
def test_slow_boot_fault_refuses(value):
    class Args(object):
        gpu = None
    args = Args()
    args.value = value
    with pytest.raises(testbed.TestbedError, match='slow-boot: --value'):
        testbed.fault_content('slow-boot', args)


def test_power_cycle_seconds(tmp_path, monkeypatch):
    monkeypatch.setattr(testbed, 'STATE_DIR', str(tmp_path))
    assert testbed.power_cycle_seconds('n1', {'slurm': 'node'}) == testbed.SLURM_POWER_CYCLE_S
    assert testbed.power_cycle_seconds('n1', {}) == 0
    faults = tmp_path / 'nodes' / 'n1' / 'faults'
    faults.mkdir(parents=True)
    (faults / 'slow-boot').write_text('150\n')
    assert testbed.power_cycle_seconds('n1', {'slurm': 'node'}) == 150
    assert testbed.power_cycle_seconds('n1', {}) == 150
