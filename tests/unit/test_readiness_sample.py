# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/readiness_sample.py runs from a checkout as docs/readiness.md gives it, and writes the six hosts it names."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess  # nosec B404 - runs the sample script with a fixed argv list
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join('tests', 'readiness_sample.py')


def test_the_sample_report_is_written(tmp_path):
    dest = str(tmp_path / 'readiness-sample')
    proc = subprocess.run([sys.executable, SCRIPT, dest], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == os.path.join(dest, 'report.html')
    for name in ('report.json', 'junit.xml', 'report.html', 'report.txt'):
        assert os.path.getsize(os.path.join(dest, name)) > 0, name
    with open(os.path.join(dest, 'report.json')) as handle:
        report = json.load(handle)
    status = dict((host, report['hosts'][host]['status']) for host in report['host_order'])
    # The docstring's hosts: converged, fresh, GPU off the bus + full /dev/shm, unreachable, never reached, gather
    # failed.
    assert status == {'gpu-a01': 'ready', 'gpu-a02': 'not_ready', 'gpu-a03': 'not_ready',
                      'gpu-a04': 'unreachable', 'gpu-a05': 'unreachable', 'gpu-a06': 'not_ready'}
    lost = [c for c in report['hosts']['gpu-a03']['checks'] if c['id'] == 'gpu.count']
    assert [c['status'] for c in lost] == ['fail']


def test_the_sample_is_not_in_the_tarball():
    """It imports the unit tests' fact sets, which the tarball leaves out, so the tarball leaves it out too."""
    with open(os.path.join(ROOT, 'galaxy.yml')) as handle:
        ignored = yaml.safe_load(handle)['build_ignore']
    assert 'tests/unit' in ignored
    assert SCRIPT in ignored
