# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import platform
import time

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, fake_script, fake_smi, run_main_rc

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._limits_conf import resolve
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml
from ansible_collections.gpufleet.nodeprep.plugins.modules import gpu_node_facts

B200 = os.path.join(FIXTURES, 'nvidia-smi-xml', 'b200-8gpu_k8s-test-infra.xml')


def run(args, capsys):
    return run_main_rc(gpu_node_facts.main, args, capsys)


@pytest.mark.parametrize('requested, expected', [
    (['all'], ['nvidia', 'kernel', 'limits', 'shm', 'nic']),
    (['nic', 'nvidia'], ['nvidia', 'nic']),
    (['shm', 'all'], ['nvidia', 'kernel', 'limits', 'shm', 'nic']),
    (['limits'], ['limits']),
    # imex only when named (its nvidia-imex-ctl -N asks every node of the domain)
    (['imex', 'all'], ['nvidia', 'kernel', 'limits', 'shm', 'nic', 'imex']),
    (['imex'], ['imex']),
])
def test_wanted_subsets(requested, expected):
    assert gpu_node_facts.wanted_subsets(requested) == expected


def test_everything_in_one_call(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'exec cat "{0}"'.format(B200))
    code, result = run({'nvidia_smi': smi, 'limits_users': ['root'], 'nic_interfaces': ['lo'],
                        'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get("msg")
    assert result['changed'] is False
    facts = result['ansible_facts']
    assert facts['nodeprep_gathered'] == ['nvidia', 'kernel', 'limits', 'shm', 'nic']
    assert facts['nodeprep_errors'] == {}
    with open(B200) as handle:
        expected = parse_nvsmi_xml(handle.read(), include_supported_clocks=False)
    expected.update(present=True, error=None, partial=False, nvidia_smi=smi)
    assert facts['nvidia'] == expected
    assert facts['kernel_state']['running'] == platform.release()
    # The node returns what it read; the action plugin of the same name resolves it on the controller.
    assert sorted(facts['limits']) == ['read']
    assert set(resolve(facts['limits']['read'])['effective']['root']['memlock']) == {'soft', 'hard'}
    assert facts['shm']['mounted'] is True
    assert list(facts['nics']) == ['lo']
    assert sorted(facts['nodeprep_timings']) == ['kernel', 'limits', 'nic', 'nvidia', 'shm']
    assert all(isinstance(v, float) and v >= 0 for v in facts['nodeprep_timings'].values())
    # facts modules return only facts
    assert sorted(k for k in result if not k.startswith('_') and k not in ('invocation', 'warnings')) == [
        'ansible_facts', 'changed']


def test_subset_only_sets_its_namespace(capsys):
    code, result = run({'gather_subset': ['shm']}, capsys)
    assert code == 0, result.get("msg")
    assert sorted(result['ansible_facts']) == ['nodeprep_errors', 'nodeprep_gathered', 'nodeprep_timings', 'shm']
    assert list(result['ansible_facts']['nodeprep_timings']) == ['shm']
    assert 'timings' not in result


def test_hang_fails_naming_the_timeout(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'exec sleep 30')
    started = time.time()
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': smi, 'nvidia_timeout': 1}, capsys)
    assert time.time() - started < 15
    assert code == 1
    assert result['failed'] is True
    assert result['subset'] == 'nvidia'
    assert result['msg'].startswith('nvidia facts: nvidia-smi -q -x did not answer within the timeout of 1 seconds')


def test_hang_reported_when_not_failing(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'exec sleep 30')
    code, result = run({'gather_subset': ['nvidia', 'shm'], 'nvidia_smi': smi, 'nvidia_timeout': 1,
                        'fail_on_error': False}, capsys)
    assert code == 0, result.get("msg")
    facts = result['ansible_facts']
    assert facts['nvidia']['present'] is False
    assert facts['nvidia']['timed_out'] is True
    assert facts['nvidia']['gpus'] == []
    assert 'within the timeout of 1 seconds' in facts['nvidia']['error']
    assert list(facts['nodeprep_errors']) == ['nvidia']
    assert facts['shm']['mounted'] is True


def test_without_its_own_timeout_nvidia_smi_has_the_command_limit(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'exec sleep 30')
    started = time.time()
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': smi, 'command_timeout': 1}, capsys)
    assert time.time() - started < 15
    assert code == 1
    assert result['msg'].startswith('nvidia facts: nvidia-smi -q -x did not answer within the timeout of 1 seconds')
    # the failed task says which command hit which limit (site.yml's run summary names it)
    assert result['timed_out'] == [{'command': smi + ' -q -x', 'seconds': 1, 'option': 'command_timeout'}]


def test_a_command_killed_at_its_limit_is_a_fact_when_the_gather_goes_on(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'exec sleep 30')
    code, result = run({'gather_subset': ['nvidia', 'shm'], 'nvidia_smi': smi, 'nvidia_timeout': 1,
                        'command_timeout': 30, 'fail_on_error': False}, capsys)
    assert code == 0, result.get('msg')
    assert result['ansible_facts']['nodeprep_timed_out'] == [
        {'command': smi + ' -q -x', 'seconds': 1, 'option': 'nvidia_timeout'}]
    code, result = run({'gather_subset': ['shm']}, capsys)
    assert 'nodeprep_timed_out' not in result['ansible_facts']


def test_unknown_interface_fails_listing_real_ones(capsys):
    code, result = run({'gather_subset': ['nic'], 'nic_interfaces': ['nosuchnic0']}, capsys)
    assert code == 1
    assert result['msg'].startswith('nic facts: ')
    assert 'nosuchnic0' in result['msg']
    assert 'lo' in result['msg']


def test_bad_timeout_rejected(capsys):
    code, result = run({'nvidia_timeout': 0}, capsys)
    assert code == 1
    assert result['msg'] == 'nvidia_timeout must be at least 1 second, got 0'
    code, result = run({'command_timeout': -5}, capsys)
    assert code == 1
    assert result['msg'] == 'command_timeout must be at least 1 second, got -5'
    code, result = run({'imex_timeout': 0, 'gather_subset': ['imex']}, capsys)
    assert code == 1
    assert result['msg'] == 'imex_timeout must be at least 1 second, got 0'


def test_the_imex_subset_runs_the_ctl_with_the_config(tmp_path, capsys, monkeypatch):
    nodes = tmp_path / 'nodes_config.cfg'
    nodes.write_text('10.0.0.1\n10.0.0.2\n')
    config = tmp_path / 'config.cfg'
    config.write_text('IMEX_NODE_CONFIG_FILE={0}\nIMEX_CMD_ENABLED=1\n'.format(nodes))
    log = tmp_path / 'argv'
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    fake_script(str(bin_dir), 'nvidia-imex-ctl', 'echo "$@" > {0}\necho \'{{"nodes": {{"0": {{"status": "READY", '
                '"host": "10.0.0.1"}}, "1": {{"status": "UNAVAILABLE", "host": "10.0.0.2"}}}}, "status": '
                '"DEGRADED"}}\''.format(log))
    monkeypatch.setenv('PATH', '{0}:{1}'.format(bin_dir, os.environ['PATH']))
    code, result = run({'gather_subset': ['imex'], 'imex_config': str(config), 'imex_timeout': 7}, capsys)
    assert code == 0, result.get('msg')
    imex = result['ansible_facts']['imex']
    assert log.read_text() == '-c {0} -N -j\n'.format(config)
    assert imex['nodes'] == ['10.0.0.1', '10.0.0.2'] and imex['nodes_path'] == str(nodes)
    assert imex['ctl']['domain']['status'] == 'DEGRADED' and imex['ctl']['rc'] == 0
    assert [n['status'] for n in imex['ctl']['domain']['nodes']] == ['READY', 'UNAVAILABLE']
    assert result['ansible_facts']['nodeprep_gathered'] == ['imex']


@pytest.mark.parametrize('kept, expected', [
    ([], ['shm']),
    (['nvidia', 'limits'], ['nvidia', 'limits', 'shm']),
    (['nic', 'shm', 'bogus'], ['shm', 'nic']),
])
def test_keep_gathered_adds_earlier_subsets(capsys, kept, expected):
    code, result = run({'gather_subset': ['shm'], 'keep_gathered': kept}, capsys)
    assert code == 0, result.get('msg')
    assert result['ansible_facts']['nodeprep_gathered'] == expected
    assert 'nvidia' not in result['ansible_facts']


def test_state_subsets_in_the_same_call(tmp_path, capsys, monkeypatch):
    conf = tmp_path / 'nccl.conf'
    conf.write_text(u'NCCL_DEBUG=WARN\n')
    monkeypatch.setattr(os.path, 'isdir', lambda path: False if path == '/run/systemd/system' else os.path.exists(path))
    code, result = run({'gather_subset': [], 'files': [str(conf), str(tmp_path / 'none')], 'units': ['slurmd'],
                        'packages': ['bash'], 'keep_gathered': ['nvidia']}, capsys)
    assert code == 0, result.get('msg')
    facts = result['ansible_facts']
    assert facts['nodeprep_gathered'] == ['nvidia', 'units', 'files', 'packages']
    assert facts['nodeprep_files'][str(conf)]['size'] == 16
    assert facts['nodeprep_files'][str(tmp_path / 'none')]['exists'] is False
    assert facts['nodeprep_units'] == {}
    assert facts['nodeprep_units_error'].startswith('this host was not booted with systemd')
    assert list(facts['nodeprep_packages']) == ['bash']
    assert sorted(facts['nodeprep_timings']) == ['files', 'packages', 'units']
    assert 'nvidia' not in facts


def test_state_options_not_given_are_not_read(capsys):
    code, result = run({'gather_subset': ['shm']}, capsys)
    assert code == 0
    for key in ('nodeprep_units', 'nodeprep_files', 'nodeprep_packages'):
        assert key not in result['ansible_facts']


@pytest.mark.parametrize('option, value, message', [
    ('files', 'etc/nccl.conf', "files: 'etc/nccl.conf' is not an absolute path"),
    ('units', 'two words', "units: 'two words' is not a unit name"),
    ('packages', '-qa', "packages: '-qa' is not a package name"),
])
def test_bad_state_option_fails_before_reading(option, value, message, capsys):
    code, result = run({'gather_subset': ['shm'], option: [value]}, capsys)
    assert code == 1
    assert result['msg'].startswith(message)
    assert result['option'] == option
    assert result['value'] == value


def test_contents_of_small_files(tmp_path, capsys):
    small = tmp_path / 'record.json'
    small.write_text(u'{"boot_id": "b"}\n')
    big = tmp_path / 'big'
    big.write_bytes(b'x' * (64 * 1024 + 1))
    code, result = run({'gather_subset': [], 'contents': [str(small), str(big), str(tmp_path / 'none')]}, capsys)
    assert code == 0, result.get('msg')
    facts = result['ansible_facts']
    assert facts['nodeprep_contents'] == {str(small): u'{"boot_id": "b"}\n', str(big): None,
                                          str(tmp_path / 'none'): None}
    assert facts['nodeprep_gathered'] == ['contents']
