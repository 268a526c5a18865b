# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""``make report-screenshots``: write the readiness report of 4 nodes and of a generated 500-node fleet
(tests/unit/plugins/plugin_utils/report_fleet.py), print their HTML size per host, and screenshot them with headless
Chromium into docs/images/.

    .venv/bin/python tests/report_screenshots.py [OUT_DIR] [IMAGES_DIR]

OUT_DIR (default .tmp/report-screenshots) gets 4-nodes/ and 500-nodes/ with every report file. Chromium is Debian's
``chromium`` (apt-get install chromium); CHROMIUM names another binary.
"""
from __future__ import absolute_import, division, print_function

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# tests/unit/conftest.py lays this checkout out as ansible_collections/gpufleet/nodeprep and puts it on sys.path.
_SPEC = importlib.util.spec_from_file_location('nodeprep_conftest', os.path.join(HERE, 'unit', 'conftest.py'))
_SPEC.loader.exec_module(importlib.util.module_from_spec(_SPEC))

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_report as rr  # noqa: E402
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.plugin_utils import report_fleet  # noqa: E402

# name, report and URL fragment, window size, extra Chromium flags
SHOTS = (
    ('readiness-report-4-nodes', '4-nodes', '1400,1250', []),
    ('readiness-report-500-nodes', '500-nodes', '1400,1400', []),
    # a filter given in the URL: the hosts where gpu.health failed or warned, ready ones hidden
    ('readiness-report-500-nodes-filtered', '500-nodes#status=f,u,w&check=gpu.health', '1400,1900', []),
    # the page as a browser with scripts off shows it: the same HTML without its <script> (Chromium's own switch,
    # --blink-settings=scriptEnabled=false, leaves --screenshot with no picture)
    ('readiness-report-500-nodes-noscript', '500-nodes-noscript', '1400,1000', []),
)


def write(dest, report):
    if not os.path.isdir(dest):
        os.makedirs(dest)
    for name, render in rr.FILES:
        with open(os.path.join(dest, name), 'w') as handle:
            handle.write(render(report))
    size = os.path.getsize(os.path.join(dest, 'report.html'))
    hosts = len(report['host_order'])
    print('{0}: report.html {1} bytes, {2} hosts, {3:.0f} bytes per host'.format(
        dest, size, hosts, float(size) / hosts))
    return os.path.join(os.path.abspath(dest), 'report.html')


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(ROOT, '.tmp', 'report-screenshots')
    images = argv[2] if len(argv) > 2 else os.path.join(ROOT, 'docs', 'images')
    pages = {'4-nodes': write(os.path.join(out, '4-nodes'), report_fleet.four_nodes()),
             '500-nodes': write(os.path.join(out, '500-nodes'), report_fleet.fleet(500))}
    with open(pages['500-nodes']) as handle:
        page = handle.read()
    pages['500-nodes-noscript'] = pages['500-nodes'].replace('report.html', 'report-noscript.html')
    with open(pages['500-nodes-noscript'], 'w') as handle:
        handle.write(page[:page.index('<script>')] + page[page.index('</script>') + len('</script>'):])
    chromium = os.environ.get('CHROMIUM') or shutil.which('chromium') or shutil.which('chromium-browser')
    if not chromium:
        print('report-screenshots: no chromium on PATH; install Debian\'s package (apt-get install chromium) or set '
              'CHROMIUM=/path/to/chromium', file=sys.stderr)
        return 1
    if not os.path.isdir(images):
        os.makedirs(images)
    for name, target, size, flags in SHOTS:
        page, _sep, fragment = target.partition('#')
        png = os.path.join(os.path.abspath(images), name + '.png')
        if os.path.exists(png):
            os.unlink(png)
        # A profile of its own per shot: a second Chromium on a busy profile hands the page to the first and exits.
        profile = tempfile.mkdtemp(prefix='chromium-', dir=os.path.abspath(out))
        argv = [chromium, '--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars',
                '--user-data-dir=' + profile, '--window-size=' + size, '--screenshot=' + png] + flags + [
                    'file://' + pages[page] + _sep + fragment]
        env = dict(os.environ, LC_ALL='C')
        try:
            subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=300)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        if not os.path.isfile(png):
            print('report-screenshots: {0} wrote no {1}'.format(chromium, png), file=sys.stderr)
            return 1
        print(png)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
