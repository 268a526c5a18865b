# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
"""The readiness role's own variables, written once: ``make settings-gen`` writes the options of
roles/readiness/meta/argument_specs.yml, its defaults/main.yml and the variable table of its README from SETTINGS
(the roles that plan have theirs in their rule modules, plugins/plugin_utils/_plans.py RULES).

The readiness_info action types these with Ansible's validator (plugin_utils/_plans.typed_with) and hands the checks
of plugins/module_utils/rules/_readiness.py the names of SETTING_NAMES; the variables of the roles that configure the
node reach their checks through those roles' plans, typed with the roles' own SETTINGS.  The collection-wide variables
of a run that the role reads (the limits, a slice's identity) are added from _run_settings.SETTINGS, their one home.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_settings

ROLE = 'readiness'

SETTINGS = {
    'nodeprep_readiness_report_dir': {
        'type': 'path', 'default': './readiness-report',
        'description': ['Directory on the controller for the report (C(report.json), C(junit.xml), C(report.html), '
                        'C(report.txt), C(readiness.prom), C(exit-status)); created when missing.']},
    'nodeprep_readiness_prometheus_textfile': {
        'type': 'str', 'default': '',
        'description': ["Also write the metrics of C(readiness.prom) to this file for node_exporter's textfile "
                        'collector on the controller (a C(.prom) name in the directory of '
                        'C(--collector.textfile.directory), which must exist), for example '
                        'C(/var/lib/node_exporter/textfile_collector/nodeprep_readiness.prom).',
                        "V('') writes them only into O(nodeprep_readiness_report_dir)."]},
    'nodeprep_readiness_node_textfile': {
        'type': 'bool', 'default': False,
        'description': ["Write each node's verdict to a file on the node for node_exporter's textfile collector "
                        '(module C(gpufleet.nodeprep.readiness_textfile)) - C(nodeprep_readiness_node_ready), the '
                        'number of checks per status and the checks that failed or warned, at most 25 series per '
                        'node, no time stamp (the file changes only when the verdict does; node_exporter\'s '
                        'C(node_textfile_mtime_seconds) says when).',
                        'The only thing readiness writes on a node; off by default.']},
    'nodeprep_readiness_node_textfile_path': {
        'type': 'path', 'default': '/var/lib/node_exporter/textfile_collector/nodeprep.prom',
        'description': ['The node textfile of O(nodeprep_readiness_node_textfile) - a C(.prom) name in the directory '
                        'node_exporter reads (C(--collector.textfile.directory); Debian\'s and Ubuntu\'s '
                        'C(prometheus-node-exporter) package reads C(/var/lib/prometheus/node-exporter)). The '
                        'directory must exist; the file is written to a temporary name there and renamed.']},
    'nodeprep_readiness_report': {
        'type': 'bool', 'default': True,
        'description': ['Write the report and print the matrix.',
                        "V(false) only keeps each node's result in the host variable C(nodeprep_readiness)."]},
    'nodeprep_readiness_fail': {
        'type': 'bool', 'default': True,
        'description': ['Fail the nodes with a failed check, and those that could not be checked, once the report is '
                        'written.',
                        'V(false) reports without failing the run.']},
    'nodeprep_readiness_xid_fail': {
        'type': 'list', 'elements': 'int', 'default': [48, 62, 64, 74, 79, 94, 95, 119, 120, 154],
        'description': ['NVIDIA Xid codes that fail C(gpu.health) when the kernel log of this boot has them; any other '
                        'Xid is a warning.',
                        'The default covers uncorrectable memory errors (48, 94, 95), row remapping failures (64), '
                        'NVLink errors (74), a GPU fallen off the bus (79), GSP errors and timeouts (119, 120), '
                        'microcontroller halts (62) and a GPU that needs a reset (154).']},
    'nodeprep_readiness_kernel_log_lines': {
        'type': 'int', 'default': 20000,
        'description': 'How many of the last kernel log lines of this boot to search for Xid events; V(0) skips it.'},
    'nodeprep_readiness_nvidia_timeout': {
        'type': 'int', 'default': 60,
        'description': 'Seconds nvidia-smi may take while the facts are gathered.'},
    'nodeprep_readiness_dcgm': {
        'type': 'bool', 'default': False,
        'description': ["Run NVIDIA DCGM's diagnostic (C(dcgmi diag -r <level> -j)) for the check C(gpu.dcgm_diag), "
                        "which fails with DCGM's own words for every GPU and test that failed.",
                        'Off by default because level 1 takes about a minute per node. Without DCGM installed the '
                        'check skips saying so, unless the role C(gpufleet.nodeprep.dcgm) manages DCGM on the node '
                        '(then it fails: that role installs it). With DCGM installed and its host engine '
                        '(C(nvidia-dcgm.service)) stopped, the check fails naming the unit: the diagnostic asked for '
                        'could not run.']},
    'nodeprep_readiness_dcgm_level': {
        'type': 'int', 'default': 1, 'choices': [1, 2, 3, 4],
        'description': 'The DCGM diagnostic level (C(dcgmi diag -r)) - 1 quick (about a minute), 2 medium, 3 long, '
                       '4 extended.'},
    'nodeprep_readiness_dcgm_timeout': {
        'type': 'int', 'default': 300,
        'description': 'Seconds C(dcgmi diag) may take; then it is killed and C(gpu.dcgm_diag) fails saying so.'},
    'nodeprep_readiness_thresholds': {
        'type': 'dict', 'default': {},
        'description': ['Site values of the health thresholds, replacing the per-model figures of '
                        'C(plugins/module_utils/rules/_fitness_thresholds.py) (docs/readiness-thresholds.md names '
                        'their sources) on every GPU model.',
                        'Keys used by the health checks - C(nvlinks) (NVLinks per GPU, C(nvlink.links)), '
                        'C(nvlink_gbps) (lowest GB/s of an active link), C(nvlink_replay_errors_max), '
                        'C(nvlink_recovery_errors_max), C(nvlink_crc_errors_max) (error counts since the driver '
                        'loaded; 0 allowed), C(pcie_width) (lanes, C(pci.link)), C(remapped_rows_uncorrectable_max) '
                        '(C(gpu.remapped_rows)). An unknown key or a value that is not a number is refused.']},
    'nodeprep_readiness_mig': {
        'type': 'str', 'default': 'disabled', 'choices': ['disabled', 'enabled', 'any'],
        'description': ['The MIG mode C(gpu.mig) wants, current and pending, on every GPU. V(disabled) (training '
                        'nodes use whole GPUs), V(enabled) (nodes partitioned for inference), V(any) (not judged).']},
    'nodeprep_readiness_performance': {
        'type': 'bool', 'default': False,
        'description': ['Run the performance gates C(perf.allreduce) (nccl-tests C(all_reduce_perf) over every GPU of '
                        'the node, 1 GiB to 16 GiB, data check on) and C(perf.nvbandwidth) (C(nvbandwidth) host to '
                        'device, device to host, device to device read), each held against the figures of the GPU '
                        'model with their public sources (docs/readiness-thresholds.md).',
                        'Only ever on a node that runs no job - a node the Slurm controller '
                        '(O(nodeprep_readiness_slurm_controller), else the group C(slurm_head)) shows drained or idle '
                        'with no job, as in the verify step of a rolling batch, or, without a scheduler, a node with '
                        'O(nodeprep_readiness_node_idle=true); any other node skips them naming why '
                        '(docs/readiness.md, "Performance gates").',
                        'The tools are the ones the role C(gpufleet.nodeprep.perf_tools) links '
                        '(C(<nodeprep_perf_tools_prefix>/bin/<tool>)), or the paths given in '
                        'C(nodeprep_perf_tools_all_reduce_perf) and C(nodeprep_perf_tools_nvbandwidth).',
                        'Off by default: they load every GPU (about a minute on an HGX node).']},
    'nodeprep_readiness_node_idle': {
        'type': 'bool', 'default': False,
        'description': ['Where no scheduler is asked (no Slurm controller known) or Slurm does not know the node: '
                        'V(true) says this node runs no job, so the performance gates may run on it; V(false) skips '
                        'them there. Slurm, where it knows the node, decides instead (a busy node never runs them).']},
    'nodeprep_readiness_performance_thresholds': {
        'type': 'dict', 'default': {},
        'description': ["The performance gates' figures that replace the table's for these hosts (a GPU model the "
                        'table has no figure for needs them): C(allreduce_busbw_gbps), C(allreduce_min_bytes), '
                        'C(allreduce_max_bytes) (the message sizes averaged, within 1 GiB to 16 GiB), '
                        'C(host_to_device_gbps), C(device_to_host_gbps), C(device_to_device_read_gbps); each a '
                        'number above 0.']},
    'nodeprep_readiness_performance_timeout': {
        'type': 'int', 'default': 600,
        'description': 'Seconds each performance tool may take; then it is killed and its gate fails saying so.'},
    'nodeprep_readiness_skip_checks': {
        'type': 'list', 'elements': 'str', 'default': [],
        'description': 'Check ids not to run on these hosts (reported as skip). Unknown ids are refused.'},
    'nodeprep_readiness_slurm': {
        'type': 'str', 'default': 'report', 'choices': ['report', 'drain'],
        'description': ['What the verdict does in Slurm. V(report) changes nothing (Slurm is not asked).',
                        "V(drain) drains a node that failed a check with the reason C(nodeprep:health:<check ids>) "
                        "when it has no reason or one of this verdict's own, and resumes a node drained with that "
                        "reason once it passes; an admin's, another tool's or a rolling maintenance run's reason is "
                        'never touched (docs/readiness.md, "Slurm"). Runs once, on '
                        'O(nodeprep_readiness_slurm_controller), before the failing nodes fail.']},
    'nodeprep_readiness_slurm_controller': {
        'type': 'str', 'default': '',
        'description': 'The host that runs C(scontrol) for O(nodeprep_readiness_slurm=drain); V(\'\') is the first '
                       'host of the inventory group C(slurm_head).'},
}

# The collection-wide variables of a run that the role reads (their one home: _run_settings.SETTINGS): the limits of
# its two remote steps, and where a slice of a sliced run writes its part of the report.
SETTINGS.update((name, _run_settings.SETTINGS[name]) for name in _run_settings.READINESS_READS)


def slurm_controller(settings, groups):
    """The host that runs ``scontrol`` for the role (its Slurm steps run there): nodeprep_readiness_slurm_controller
    (typed, in ``settings``), else the first host of the inventory group slurm_head (``groups``: Ansible's), else None
    (no Slurm controller known)."""
    named = settings.get('nodeprep_readiness_slurm_controller') or ''
    if named:
        return named
    heads = (groups or {}).get('slurm_head') or []
    return str(heads[0]) if heads else None
