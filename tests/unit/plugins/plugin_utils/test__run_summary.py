# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The end-of-run summary of site.yml (plugins/plugin_utils/_run_summary.py): recorded plans, reboots and errors ->
the summary and its lines; the errors the collection names a variable for."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.action import run_summary as action
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_summary as S
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

ROLES = ('kernel', 'nvidia_driver', 'gpu_settings', 'memlock', 'shm', 'nccl', 'nic_offload')
NO_GPU = 'not a GPU node (no NVIDIA GPU on the PCI bus): no work of the GPU roles (...)'


def plan(reasons=(), reboot=(), gpu_skip=None, allowed=False):
    out = {'reasons': list(reasons), 'reboot': {'needed': bool(reboot), 'why': list(reboot), 'allowed': allowed}}
    if gpu_skip is not None:
        out['gpu_skip'] = gpu_skip
    return out


def node(plans=None, errors=None, reboot_reasons=None):
    return {'record': S.record(plans or {}, ROLES), 'errors': errors or {},
            'reboot_required': bool(reboot_reasons), 'reboot_reasons': reboot_reasons or []}


DRIVER_FAILED = S.error_of('nvidia_driver', 'Install the driver packages',
                           {'msg': 'Failed to download metadata for repo \'cuda-rhel9\': Cannot download repomd.xml'})

# name, hosts, alive, nodes, check mode, expected summary (the keys given)
CASES = [
    ('a converged fleet: every node unchanged', ['a', 'b'], ['a', 'b'],
     {'a': node({'kernel': plan()}), 'b': node({'shm': plan()})}, False,
     {'changed': {}, 'reboot': {}, 'failed': {}, 'no_gpu': {}, 'unchanged': ['a', 'b'],
      'counts': {'changed': 0, 'reboot': 0, 'failed': 0, 'no_gpu': 0, 'limits': 0, 'unchanged': 2}}),
    ('a node changed, one needs a reboot it was not allowed (nodeprep_reboot_ok false)', ['a', 'b'], ['a', 'b'],
     {'a': node({'shm': plan(['/dev/shm is 32G, want 64G'])}),
      'b': node({'nvidia_driver': plan(['driver: not installed'])}, reboot_reasons=['nouveau is loaded'])}, False,
     {'changed': {'a': {'shm': ['/dev/shm is 32G, want 64G']}, 'b': {'nvidia_driver': ['driver: not installed']}},
      'reboot': {'b': ['nouveau is loaded']}, 'unchanged': []}),
    ('a node left the run without a recorded error: failed, unreachable', ['a', 'b'], ['a'],
     {'a': node(), 'b': node({'kernel': plan(['kernel: devel missing'])})}, False,
     {'failed': {'b': {'role': None, 'task': None, 'hint': None, 'roles': [], 'not_predicted': [],
                       'changes': {'kernel': ['kernel: devel missing']},
                       'msg': 'unreachable, or failed before site.yml could record the error (see the run output)'}},
      'changed': {}, 'unchanged': ['a']}),
    ('the first error is the first role of site.yml that failed', ['a'], ['a'],
     {'a': node({'memlock': plan(['limits'])}, errors={
         'shm': S.error_of('shm', 'Mount', {'msg': 'shm error'}),
         'kernel': S.error_of('kernel', 'Install', {'msg': 'kernel error'})})}, False,
     {'failed': {'a': {'role': 'kernel', 'task': 'Install', 'msg': 'kernel error', 'hint': None, 'limits': [],
                       'unreachable': False, 'roles': ['kernel', 'shm'], 'not_predicted': [],
                       'changes': {'memlock': ['limits']}}},
      'changed': {}}),
    ('a node without GPUs: skipped in one line, nothing changed', ['head'], ['head'],
     {'head': node({'kernel': plan(gpu_skip=NO_GPU), 'nvidia_driver': plan(gpu_skip=NO_GPU),
                    'memlock': plan()})}, False,
     {'no_gpu': {'head': NO_GPU}, 'unchanged': ['head'], 'changed': {}}),
    ('check mode: what would change, the reboot the plan predicts, the driver error and what is not predicted',
     ['a', 'b'], ['a', 'b'],
     {'a': node({'kernel': plan(['kernel-devel-matched missing'], reboot=['new kernel'], allowed=True)}),
      'b': node({'memlock': plan(['limits'])}, errors={'nvidia_driver': DRIVER_FAILED})}, True,
     {'changed': {'a': {'kernel': ['kernel-devel-matched missing']}}, 'reboot': {'a': ['new kernel']},
      'failed': {'b': dict(DRIVER_FAILED, roles=['nvidia_driver'], not_predicted=['imex', 'gpu_settings'],
                           changes={'memlock': ['limits']})}}),
    ('a real run: a rebooted node (the role cleared its request) needs no reboot', ['a'], ['a'],
     {'a': node({'kernel': plan(['new kernel'], reboot=['new kernel'], allowed=True)})}, False,
     {'reboot': {}, 'changed': {'a': {'kernel': ['new kernel']}}}),
]


@pytest.mark.parametrize('name, hosts, alive, nodes, check_mode, expected', CASES, ids=[c[0] for c in CASES])
def test_summary(name, hosts, alive, nodes, check_mode, expected):
    summary = S.build(hosts, alive, nodes, check_mode=check_mode, roles=ROLES)
    assert summary['hosts'] == len(hosts) and summary['check_mode'] is check_mode
    for key, want in expected.items():
        assert summary[key] == want, key


def test_lines():
    summary = S.build(['a', 'b', 'head'], ['a', 'head'], {
        'a': node({'shm': plan(['fstab']), 'nvidia_driver': plan(['driver: not installed'])},
                  reboot_reasons=['nouveau is loaded']),
        'b': node(errors={'kernel': S.error_of('kernel', 'Install the devel package', {
            'msg': 'Failed to install some of the specified packages',
            'failures': ['No package kernel-devel-uname-r = 6.1.0-custom available.']})}),
        'head': node({'kernel': plan(gpu_skip=NO_GPU)})}, roles=ROLES)
    assert S.render(summary, ROLES) == [
        '3 host(s): 1 changed, 1 need a reboot, 1 failed, 1 not GPU nodes, 1 unchanged',
        'changed a: nvidia_driver, shm',
        'reboot a: nouveau is loaded',
        'failed b: kernel: Install the devel package: Failed to install some of the specified packages; No package '
        'kernel-devel-uname-r = 6.1.0-custom available. -> the devel/headers package of the running kernel is in no '
        'repository the node has (a custom kernel?): install its headers yourself and set '
        'nodeprep_kernel_manage_devel: false',
        'no GPU head: ' + NO_GPU,
    ]
    check = S.build(['a'], ['a'], {'a': node({'shm': plan(['x'])})}, check_mode=True, roles=ROLES)
    assert S.render(check, ROLES) == ['1 host(s) (check mode: what a run would do): 1 would change, 0 would need a '
                                      'reboot, 0 failed, 0 not GPU nodes, 0 unchanged', 'would change a: shm']


# The failures as the tools word them (sources: tests/fixtures/SOURCES.md "Failure messages of the run summary"),
# in the shape ansible_failed_result has: a loop's result says only "One or more items failed", its failed items
# say what failed.
URL_ERROR = 'Request failed: <url' + 'open error [Errno 113] No route to host>'


def looped(*items):
    return {'failed': True, 'changed': False, 'msg': 'One or more items failed',
            'results': [dict(item, failed=True) for item in items]}


# role, task, result, words the hint must hold (None: no hint)
HINTS = [
    ('kernel', 'Install the devel package of the kernel that boots next',
     {'msg': 'No package kernel-devel-matched-6.1.0-custom available.'}, 'nodeprep_kernel_manage_devel'),
    ('kernel', 'Install the headers', {'msg': "No package matching 'linux-headers-6.1.0-custom' is available"},
     'nodeprep_kernel_manage_devel'),
    ('nvidia_driver', 'Install the kernel devel package', {'msg': 'Unable to locate package linux-headers-6.8.0-x'},
     'nodeprep_kernel_manage_devel'),
    # As the fleet's devel-missing fault makes Ansible's apt and dnf modules say it (measured).
    ('kernel', 'Install the development tree matched to the kernel that boots next',
     {'msg': 'no available installation candidate for linux-headers-6.18.44-fc-v1045'}, 'nodeprep_kernel_manage_devel'),
    ('kernel', 'Install the development tree matched to the kernel that boots next',
     {'msg': 'Failed to install some of the specified packages', 'failures': [
         'kernel-devel-uname-r = 6.18.44-fc-v1045 All matches were filtered out by exclude filtering for argument: '
         'kernel-devel-uname-r = 6.18.44-fc-v1045'], 'rc': 1, 'results': []}, 'nodeprep_kernel_manage_devel'),
    ('nvidia_driver', 'Install the driver packages',
     {'msg': "Failed to download metadata for repo 'cuda-rhel9': Cannot download repomd.xml: Curl error (7): "
             "Couldn't connect to server"}, 'nodeprep_nvidia_driver_repo_url'),
    # get_url of the apt key, in its loop: the failed item names the URL it could not fetch.
    ('nvidia_driver', "Fetch NVIDIA's repository signing key (apt) or its runfile",
     looped({'msg': URL_ERROR, 'url': 'https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/'
                                      '3bf863cc.pub', 'dest': '/etc/apt/keyrings/nodeprep-cuda.asc'}),
     'nodeprep_nvidia_driver_repo_url'),
    ('nvidia_driver', 'Install EPEL', {'msg': "Failed to download metadata for repo 'nodeprep-epel'"},
     'nodeprep_nvidia_driver_epel_url'),
    ('kernel', 'Install the ELRepo kernel', {'msg': "Failed to download metadata for repo 'elrepo-kernel'"},
     'nodeprep_kernel_elrepo_url'),
    ('nvidia_driver', 'Install the driver packages', {'msg': 'Depsolve Error occurred: conflicting requests'}, None),
    ('shm', 'Mount /dev/shm', {'msg': 'Failed to download metadata'}, None),
    # The driver's reboot: the node did not come back (Ansible's reboot action, timed out waiting for a new boot
    # id), or came back without running commands. Not a repository: the reboot's own hint, with the role's timeout.
    ('nvidia_driver', 'Reboot the node',
     {'failed': True, 'rebooted': True, 'msg': 'Timed out waiting for last boot time check (timeout=1800)'},
     'did not come back from the reboot within 1800 s (last boot time check timed out)'),
    ('nvidia_driver', 'Reboot the node',
     {'failed': True, 'rebooted': True, 'msg': 'Timed out waiting for last boot time check (timeout=1800)'},
     'a larger nodeprep_nvidia_driver_reboot_timeout'),
    ('kernel', 'Reboot the node',
     {'failed': True, 'rebooted': True, 'msg': 'Timed out waiting for post-reboot test command (timeout=600)'},
     'a larger nodeprep_kernel_reboot_timeout'),
    # The driver packages in their loop (dnf 4 and dnf 5 as Ansible's dnf modules return the exception's words).
    ('nvidia_driver', 'Install the NVIDIA driver packages',
     looped({'msg': "Failed to download metadata for repo 'cuda-rhel9': Cannot download repomd.xml: Cannot download "
                    'repodata/repomd.xml: All mirrors were tried', 'rc': 1, 'results': []}),
     'nodeprep_nvidia_driver_repo_url'),
    ('nvidia_driver', 'Install the NVIDIA driver packages',
     looped({'msg': 'Failed to download metadata (baseurl: "https://developer.download.nvidia.com/compute/cuda/repos/'
                    'rhel10/x86_64/") for repository "cuda-rhel10"', 'failures': [], 'rc': 1}),
     'nodeprep_nvidia_driver_repo_url'),
    # apt's update through the mirror NVIDIA's repository is on.
    ('nvidia_driver', 'Refresh the apt cache after the repository changed',
     {'msg': 'Failed to update apt cache after 5 retries: W:Failed to fetch https://developer.download.nvidia.com/'
             "compute/cuda/repos/ubuntu2404/x86_64/InRelease  Could not resolve 'developer.download.nvidia.com', "
             'W:Some index files failed to download. They have been ignored, or old ones used instead.'},
     'nodeprep_nvidia_driver_repo_url'),
    # The runfile: its own URL.
    ('nvidia_driver', "Fetch NVIDIA's repository signing key (apt) or its runfile",
     looped({'msg': 'Request failed', 'status_code': 404, 'response': 'HTTP Error 404: Not Found',
             'url': 'https://us.download.nvidia.com/tesla/580.105.08/NVIDIA-Linux-x86_64-580.105.08.run',
             'dest': '/var/lib/nodeprep/NVIDIA-Linux-x86_64-580.105.08.run'}),
     'nodeprep_nvidia_driver_runfile_url'),
    # Failures the collection does not recognise get no hint: timeouts that are not a download (nvidia-smi as the
    # gather words it, systemd), apt failing on another repository, a reboot the node refused, a driver that did
    # not come up after the reboot (the plan's words).
    ('nvidia_driver', 'Check that nvidia-smi lists every GPU with the wanted driver loaded',
     {'msg': 'nvidia_driver on gpu-a01: nvidia-smi -q -x did not answer within the timeout of 60 seconds and was '
             'killed; a GPU may have fallen off the bus (check dmesg for Xid 79) or the driver is hung'}, None),
    ('nvidia_driver', "Enable and start the driver's services",
     {'msg': 'Unable to start service nvidia-fabricmanager: Job for nvidia-fabricmanager.service failed because a '
             'timeout was exceeded.'}, None),
    ('nvidia_driver', 'Refresh the apt cache after the repository changed',
     {'msg': 'Failed to update apt cache: unknown reason'}, None),
    ('nvidia_driver', 'Refresh the apt cache after the repository changed',
     {'msg': 'Failed to update apt cache after 5 retries: W:Failed to fetch https://acme.example/mirror-Debian/debs/'
             "InRelease  Could not resolve 'acme.example'"}, None),
    ('nvidia_driver', 'Reboot the node',
     {'failed': True, 'rebooted': False, 'msg': "Reboot command failed. Error was: 'Failed to set wall message, "
                                                "ignoring: Interactive authentication required., '"}, None),
    ('nvidia_driver', 'Check that the reboot brought what it was for',
     {'msg': 'nvidia_driver on gpu-a01: The node rebooted but the installed NVIDIA driver 580.105.08 is not loaded: '
             'nouveau is loaded (NVIDIA module loaded=False version=none). The role does not reboot again.'}, None),
    ('kernel', 'Check that the reboot brought what it was for',
     {'msg': "kernel on gpu-a01: The node rebooted but runs 5.14.0-570.el9.x86_64, not 6.12.9-1.el9.elrepo.x86_64 "
             "(the boot loader's default is now 5.14.0-570.el9.x86_64)."}, None),
    ('shm', 'Reboot the node', {'msg': 'Timed out waiting for last boot time check (timeout=1800)'}, None),
]


@pytest.mark.parametrize('role, task, result, variable', HINTS)
def test_hint_names_the_variable(role, task, result, variable):
    error = S.error_of(role, task, result)
    assert (variable in error['hint']) if variable else error['hint'] is None, error['hint']
    if variable and 'reboot' in variable:
        assert 'repo_url' not in error['hint']


def test_a_loop_failure_says_what_its_failed_items_say():
    result = looped({'msg': URL_ERROR, 'url': 'https://developer.download.nvidia.com/x/3bf863cc.pub'})
    result['results'].insert(0, {'failed': False, 'msg': 'OK (1234 bytes)', 'url': 'https://example.invalid/a'})
    assert S.error_text(result) == ('One or more items failed; ' + URL_ERROR +
                                    ' (https://developer.download.nvidia.com/x/3bf863cc.pub)')


def test_error_text_takes_msg_failures_and_the_last_line_of_stderr():
    assert S.error_text({'msg': 'Failed', 'failures': ['No package x available.'], 'stderr': 'a\nE: last'}) == \
        'Failed; No package x available.; E: last'
    assert S.error_text({}) == 'failed (no message)'


def test_record_keeps_the_earlier_roles_and_replaces_those_planned_again():
    first = S.record({'kernel': plan(['k']), 'shm': plan(['s'])}, ['kernel', 'shm'])
    again = S.record({'shm': plan([])}, ['shm'], first)
    assert again == {'kernel': {'changes': ['k'], 'reboot': [], 'reboot_allowed': False, 'gpu_skip': None},
                     'shm': {'changes': [], 'reboot': [], 'reboot_allowed': False, 'gpu_skip': None}}


@pytest.mark.parametrize('errors, check_mode, want', [
    ({'nvidia_driver': DRIVER_FAILED}, True, ['imex', 'gpu_settings']),
    ({'nvidia_driver': DRIVER_FAILED}, False, []),
    ({'kernel': DRIVER_FAILED}, True, []),
    ({}, True, []),
])
def test_unpredicted(errors, check_mode, want):
    assert S.unpredicted(errors, check_mode) == want


def test_the_summary_lands_where_the_readiness_report_does():
    with open(os.path.join(ROOT, 'roles', 'readiness', 'defaults', 'main.yml')) as handle:
        defaults = yaml.safe_load(handle)
    assert action.DEFAULT_DEST == defaults['nodeprep_readiness_report_dir']


# ------------------------------------------------------------------------------ the limits of a run

def test_limit_of_each_limit():
    # Ansible's task timeout on the whole gather (ansible_failed_result.timedout.period)
    assert S.limit_of({'failed': True, 'msg': 'Task failed: Timed out after 30 second(s).',
                       'timedout': {'period': 30}}) == [
        {'limit': 'gather', 'variable': 'nodeprep_gather_timeout', 'seconds': 30, 'what': 'the whole remote step'}]
    # the SSH connect limit, as the node_plan action reports it
    ssh = {'limit': 'ssh_connect', 'variable': 'ansible_ssh_timeout', 'seconds': 10, 'what': 'the SSH connection'}
    assert S.limit_of({'failed': True, 'nodeprep_unreachable': True, 'limit': ssh}) == [ssh]
    # a command the gather killed (gpu_node_facts' timed_out)
    assert S.limit_of({'timed_out': [{'command': '/usr/bin/nvidia-smi -q -x', 'seconds': 60,
                                      'option': 'command_timeout'}]}) == [
        {'limit': 'command', 'variable': 'nodeprep_command_timeout', 'seconds': 60,
         'what': '/usr/bin/nvidia-smi -q -x'}]
    # no limit: an error of another kind
    assert S.limit_of({'msg': 'Connection refused', 'limit': None, 'timed_out': []}) == []
    assert S.limit_of('not a dict') == []


def test_an_unreachable_gather_is_recorded_as_unreachable():
    error = S.error_of('gather', 'Gather the node and plan every role', {
        'failed': True, 'nodeprep_unreachable': True, 'msg': 'Connection timed out during banner exchange',
        'limit': {'limit': 'ssh_connect', 'variable': 'ansible_ssh_timeout', 'seconds': 10,
                  'what': 'the SSH connection'}})
    assert error['unreachable'] is True and error['limits'][0]['limit'] == 'ssh_connect'
    assert S.error_of('shm', 'Mount', {'msg': 'x'})['unreachable'] is False


def test_lines_name_the_nodes_that_hit_a_limit():
    hung = S.error_of('gather', 'Gather the node and plan every role', {
        'failed': True, 'nodeprep_unreachable': True, 'msg': 'Connection timed out during banner exchange',
        'limit': {'limit': 'ssh_connect', 'variable': 'ansible_ssh_timeout', 'seconds': 10,
                  'what': 'the SSH connection'}})
    summary = S.build(['a', 'b', 'c'], ['a', 'c'], {
        'a': node(), 'b': node(errors={'gather': hung}),
        'c': dict(node(), timed_out=[{'command': '/usr/bin/systemctl show x', 'seconds': 60,
                                      'option': 'command_timeout'}])}, roles=ROLES, run_id='4711')
    assert summary['run_id'] == '4711'
    assert summary['counts'] == {'changed': 0, 'reboot': 0, 'failed': 1, 'no_gpu': 0, 'limits': 2, 'unchanged': 2}
    assert S.render(summary, ROLES) == [
        '3 host(s): 0 changed, 0 need a reboot, 1 failed, 0 not GPU nodes, 2 unchanged, 2 hit a limit',
        'failed b: gather: Gather the node and plan every role: Connection timed out during banner exchange',
        'limit b: the SSH connection: stopped at the ssh connect limit of 10 s (ansible_ssh_timeout)',
        'limit c: /usr/bin/systemctl show x: stopped at the command limit of 60 s (nodeprep_command_timeout)',
    ]
